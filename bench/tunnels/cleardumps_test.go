package tunnels

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A results directory reused by a later run shows that run's stalls only: old dumps go, other files
// stay, and a directory that does not exist yet is no error.
func TestClearDumpsRemovesOnlyOldDumps(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"unary-1MiB_c16_x_warmup" + dumpSuffix, "old_round2" + dumpSuffix, "notes.txt", "summary.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := ClearDumps(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"notes.txt", "summary.json"}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	if err := ClearDumps(filepath.Join(dir, "missing")); err != nil {
		t.Fatalf("missing dir: %v", err)
	}
	if err := ClearDumps(""); err != nil {
		t.Fatalf("no dir: %v", err)
	}
}
