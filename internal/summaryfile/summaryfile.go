// Package summaryfile writes and reads the summary.json that every bench and chaos run leaves, so that
// both kinds of results are found, written and checked the same way.
package summaryfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Name is the file a run's summary is written to in its results directory.
const Name = "summary.json"

// Write writes v, indented, to dir/summary.json.
func Write(dir string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, Name), append(b, '\n'), 0o644)
}

// Read reads path (a summary.json, or the directory holding one) into v, after checking that its
// "schema" field is schema: a file of another kind or version is an error naming both.
func Read(path, schema string, v any) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, Name)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if head.Schema != schema {
		return fmt.Errorf("%s: schema %q, want %q", path, head.Schema, schema)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
