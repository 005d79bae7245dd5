// Package golden compares what a test produced with a file under testdata, or rewrites that file when
// the test runs with -update, for every package whose writers have golden files.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata instead of comparing with them")

// Compare compares got with testdata/name, or rewrites that file with -update. A text file that differs
// is shown whole; a picture (.svg, .png, .pdf) is only named, to be looked at.
func Compare(t testing.TB, name string, got []byte) {
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
		t.Fatalf("%v (run go test with -update in this package to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	switch filepath.Ext(name) {
	case ".svg", ".png", ".pdf":
		t.Errorf("%s differs from the golden file (run go test with -update in this package and look at the picture)", name)
	default:
		t.Errorf("%s differs from the golden file (run go test with -update in this package and review the diff):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
