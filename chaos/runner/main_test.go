package runner

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// update rewrites the golden files of this package's writers instead of comparing with them:
//
//	go test ./chaos/runner -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./chaos/runner -update to create it)", err)
	}
	if !bytes.Equal(got, want) && filepath.Ext(name) == ".svg" {
		t.Errorf("%s differs from the golden file (run go test ./chaos/runner -update and look at the picture)", name)
	} else if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test ./chaos/runner -update and review the diff):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
