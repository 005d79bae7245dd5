package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tunnelbench/tunnelbench/internal/golden"
)

// testSummary reads testdata/summary.json: two groups (one with errors), three scale steps.
func testSummary(t *testing.T) *Summary {
	t.Helper()
	s, err := ReadSummary(filepath.Join("testdata", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWriteMarkdownGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, testSummary(t)); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "report.golden.md", b.Bytes())
}

func TestWriteTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, testSummary(t)); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "table.golden.txt", b.Bytes())
}

// TestSummaryJSONContract: the fixture re-encodes byte for byte, so a renamed or retyped field of the
// tunnelbench/bench/v1 schema fails here.
func TestSummaryJSONContract(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(testSummary(t), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if got = append(got, '\n'); !bytes.Equal(got, want) {
		t.Errorf("summary.json does not round-trip:\n--- got\n%s\n--- want\n%s", got, want)
	}
	dir := t.TempDir()
	if err := testSummary(t).WriteJSON(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "summary.json")); !bytes.Equal(b, want) {
		t.Errorf("WriteJSON writes something else than the fixture")
	}
}

func TestReadSummaryRejectsOtherSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary.json")
	if err := os.WriteFile(path, []byte(`{"schema":"tunnelbench/bench/v0","cases":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSummary(path); err == nil {
		t.Error("a summary of another schema was accepted")
	}
}
