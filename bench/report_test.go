package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tunnelbench/tunnelbench/internal/golden"
)

// testSummary reads testdata/summary.json: two groups of two rounds (one case with errors within the
// 1% the run tolerates), three scale steps.
func testSummary(t *testing.T) *Summary { return readFixture(t, "summary.json") }

// targetSummary reads testdata/summary_target.json: a --target run over TLS with a caller token, no
// direct baseline, whose 1 MiB case failed every call with Unavailable (as issue 15 found it).
func targetSummary(t *testing.T) *Summary { return readFixture(t, "summary_target.json") }

func readFixture(t *testing.T, name string) *Summary {
	t.Helper()
	s, err := ReadSummary(filepath.Join("testdata", name))
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

// TestTargetReportGolden: a failed --target run shows its failure first, with errors by code and zero
// throughput, and its target settings without the token.
func TestTargetReportGolden(t *testing.T) {
	s := targetSummary(t)
	var md, txt bytes.Buffer
	if err := WriteMarkdown(&md, s); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "report_target.golden.md", md.Bytes())
	if err := WriteTable(&txt, s); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "table_target.golden.txt", txt.Bytes())
	for _, want := range []string{"FAILED", "Unavailable 159480", "over TLS (CA file `ca.pem`, server name `kas.example`, client certificate `caller.pem`)",
		"caller token from `caller-token.txt`", "| 0 | 0.0 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if !strings.Contains(txt.String(), "unary-1MiB/c1/tunnel-public: 159480 of 159480 calls failed (Unavailable 159480)") {
		t.Errorf("the table does not list the failure by code:\n%s", txt.String())
	}
	if f := s.Failures(); len(f) != 1 {
		t.Errorf("failures %q", f)
	}
}

// TestTableWidth: with the default matrix's longest case name and figures as wide as a loaded machine
// gives (p99 near a second, a million calls/s, 10 GB/s), the terminal table stays within TerminalWidth.
func TestTableWidth(t *testing.T) {
	s := targetSummary(t)
	s.Cases[1].Name = "server-stream-64KiB/c64/tunnel-single-use"
	s.Cases[1].RatioToDirect = &Ratio{P50: 12.34, CallsPerSec: 0.01, BytesPerSec: 0.01}
	s.Cases[1].Latency.P50, s.Cases[1].Latency.P99, s.Cases[1].CallsPerSec, s.Cases[1].BytesPerSec = 99999, 999999, 999999, 9999.9e6
	var b bytes.Buffer
	if err := WriteTable(&b, s); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, b.String())
}

func checkWidth(t *testing.T, text string) {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(l); n > TerminalWidth {
			t.Errorf("a line of %d characters (at most %d):\n%s", n, TerminalWidth, l)
		}
	}
}

// TestSummaryJSONContract: each fixture re-encodes byte for byte, so a renamed or retyped field of the
// schema fails here; the v1 fixture still reads and re-encodes as it was (v2 only added fields).
func TestSummaryJSONContract(t *testing.T) {
	for _, name := range []string{"summary.json", "summary_new.json", "summary_target.json", "summary_v1.json"} {
		want, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		s := readFixture(t, name)
		got, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, '\n'); !bytes.Equal(got, want) {
			t.Errorf("%s does not round-trip:\n--- got\n%s\n--- want\n%s", name, got, want)
		}
		dir := t.TempDir()
		if err := s.WriteJSON(dir); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "summary.json")); !bytes.Equal(b, want) {
			t.Errorf("WriteJSON writes something else than %s", name)
		}
	}
	if s := readFixture(t, "summary_v1.json"); s.Schema != SummarySchemaV1 || s.Settings != nil {
		t.Errorf("v1 fixture read as schema %q, settings %v", s.Schema, s.Settings)
	}
}

// TestFixtureSpreads: the fixtures' spreads are what spreadOf and ratioSpread make of their rounds.
func TestFixtureSpreads(t *testing.T) {
	for _, name := range []string{"summary.json", "summary_new.json", "summary_target.json"} {
		s := readFixture(t, name)
		byName := map[string]CaseResult{}
		for _, c := range s.Cases {
			byName[c.Name] = c
		}
		for _, c := range s.Cases {
			if !spreadNear(c.Spread, spreadOf(c.Rounds)) {
				t.Errorf("%s %s: spread %+v, rounds give %+v", name, c.Name, c.Spread, spreadOf(c.Rounds))
			}
			if c.Pair != "" && !spreadNear(c.RatioSpread, ratioSpread(c.Rounds, byName[c.Pair].Rounds)) {
				t.Errorf("%s %s: ratio spread %+v", name, c.Name, c.RatioSpread)
			}
		}
	}
}

func spreadNear(a, b *Spread) bool {
	if a == nil || b == nil {
		return a == b
	}
	for _, m := range Metrics {
		if !near(a.of(m), b.of(m)) {
			return false
		}
	}
	return true
}

// TestSpreadOf: the spread is (max − min) ÷ median per figure, none for one round.
func TestSpreadOf(t *testing.T) {
	rounds := []RoundResult{
		{CallsPerSec: 90, BytesPerSec: 0, P50us: 100, P99us: 400},
		{CallsPerSec: 100, BytesPerSec: 0, P50us: 110, P99us: 400},
		{CallsPerSec: 120, BytesPerSec: 0, P50us: 90, P99us: 400},
	}
	got := spreadOf(rounds)
	if want := (&Spread{P50: 0.2, P99: 0, CallsPerSec: 0.3, BytesPerSec: 0}); !spreadNear(got, want) {
		t.Errorf("spread %+v, want %+v", got, want)
	}
	direct := []RoundResult{{CallsPerSec: 180, P50us: 50, P99us: 200}, {CallsPerSec: 200, P50us: 55, P99us: 200}, {CallsPerSec: 240, P50us: 45, P99us: 200}}
	if got := ratioSpread(rounds, direct); !spreadNear(got, &Spread{}) {
		t.Errorf("ratios that held still have spread %+v", got)
	}
	if spreadOf(rounds[:1]) != nil || ratioSpread(rounds[:1], direct) != nil {
		t.Error("one round has a spread")
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
