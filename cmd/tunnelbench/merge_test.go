package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/bench/result"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// writeRun writes a one-group run whose calls took base, base+1, … µs, as bench would leave it.
func writeRun(t *testing.T, started time.Time, calls int, base int64) string {
	t.Helper()
	mk := func(name, path, pair string) bench.CaseResult {
		h := load.NewHistogram()
		for i := range calls {
			_ = h.RecordValue(base + int64(i))
		}
		enc, err := result.EncodeHistogram(h)
		if err != nil {
			t.Fatal(err)
		}
		return bench.CaseResult{Name: name, Path: path, Pair: pair, Shape: "unary", PayloadBytes: 64, Concurrency: 1, Mode: "closed",
			Calls: int64(calls), CallsPerSec: float64(calls), Latency: result.LatencyOf(h), LatencyHDR: enc}
	}
	s := &bench.Summary{Schema: bench.SummarySchema, Env: bench.Env{OS: "linux", Arch: "amd64", CPUs: 2, GitCommit: "abc", StartedAt: started},
		Cases: []bench.CaseResult{mk("unary-64B/c1/direct", "direct", ""), mk("unary-64B/c1/tunnel", "tunnel", "unary-64B/c1/direct")}}
	dir := t.TempDir()
	if err := s.WriteJSON(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMergeCommand: two runs become one summary.json, report.md and plots; the table is printed.
func TestMergeCommand(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a, b := writeRun(t, start, 1000, 10), writeRun(t, start.Add(2*time.Second), 3000, 1000)
	out := filepath.Join(t.TempDir(), "merged")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"merge", a, filepath.Join(b, "summary.json"), "--out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("merge: %v\n%s", err, stderr.String())
	}
	sum, err := bench.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	// 4000 calls: 10..1009 µs and 1000..3999 µs; the median (rank 2000) is 1999 µs.
	if len(sum.MergedFrom) != 2 || sum.Cases[1].Calls != 4000 || sum.Cases[1].Latency.P50 != 1999 || sum.Cases[1].CallsPerSec != 4000 {
		t.Errorf("merged: %d runs, tunnel case %+v", len(sum.MergedFrom), sum.Cases[1])
	}
	for _, f := range []string{"report.md", "plots/latency.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if !strings.Contains(stdout.String(), "merged 2 runs") || !strings.Contains(stdout.String(), "unary-64B/c1/tunnel") || stderr.Len() != 0 {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}

// TestMergeBadInput: exit 2 with a one-line reason for every input merge cannot use.
func TestMergeBadInput(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a, b := writeRun(t, start, 100, 10), writeRun(t, start, 200, 10)
	small := writeRun(t, start, 100, 10)
	s, err := bench.ReadSummary(small)
	if err != nil {
		t.Fatal(err)
	}
	s.Cases = s.Cases[:1]
	if err := s.WriteJSON(small); err != nil {
		t.Fatal(err)
	}
	old, err := filepath.Abs(filepath.Join("..", "..", "bench", "testdata", "summary.json")) // written before latency_hdr
	if err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(t.TempDir(), "summary.json")
	if err := os.WriteFile(notJSON, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"merge"}, "merge needs at least two runs' directories, got 0"},
		{[]string{"merge", a}, "merge needs at least two runs' directories, got 1"},
		{[]string{"merge", a, filepath.Join(b, "nothing-here")}, "no such file or directory"},
		{[]string{"merge", a, notJSON}, "unexpected end of JSON input"},
		{[]string{"merge", a, old}, "has no latency histogram (latency_hdr)"},
		{[]string{"merge", a, small}, "are runs of different matrices"},
		{[]string{"merge", a, a}, "are the same run"},
		{[]string{"merge", a, b, "--out", a}, "is one of the runs"},
		{[]string{"merge", a, b, "--bogus"}, "unknown flag --bogus"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, &stdout, &stderr)
		code := cli.ExitCode("tunnelbench", err, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 2 || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, msg, tc.want)
		}
	}
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"merge", "--help"}, &stdout, &bytes.Buffer{}); cli.ExitCode("tunnelbench", err, &bytes.Buffer{}) != 0 ||
		!strings.Contains(stdout.String(), "Usage: tunnelbench merge [--out DIR] RUN RUN...") {
		t.Errorf("merge --help: %v\n%s", err, stdout.String())
	}
}
