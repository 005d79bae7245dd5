package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadSuite: the shipped scenarios load in file order; only picks some.
func TestLoadSuite(t *testing.T) {
	dir := filepath.Join("..", "..", "scenarios")
	all, err := LoadSuite(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(all) == 0 || len(all) != len(files) {
		t.Fatalf("%d scenarios for %d files", len(all), len(files))
	}
	for i, sc := range all {
		if sc.File != files[i] {
			t.Errorf("scenario %d is %s, want %s", i, sc.File, files[i])
		}
	}
	some, err := LoadSuite(dir, []string{all[1].Name, all[0].Name})
	if err != nil || len(some) != 2 || some[0].Name != all[0].Name {
		t.Errorf("only two: %v, %v", some, err)
	}
}

// TestLoadSuiteErrors: every bad file and every unknown name is in the one error.
func TestLoadSuiteErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadSuite(dir, nil); err == nil || !strings.Contains(err.Error(), "no scenario files") {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := LoadSuite(filepath.Join(dir, "missing"), nil); err == nil || !strings.Contains(err.Error(), "no scenario files") {
		t.Errorf("missing directory: %v", err)
	}
	for name, text := range map[string]string{"a.yaml": "name: [", "b.yaml": "name: b\n", "notes.txt": "not a scenario"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadSuite(dir, []string{"nope", "nope"})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "a.yaml") || !strings.Contains(msg, "b.yaml") || strings.Count(msg, "--only: no scenario named nope") != 1 || strings.Contains(msg, "notes.txt") {
		t.Errorf("error:\n%v", msg)
	}
}
