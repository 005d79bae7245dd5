package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/internal/golden"
)

// compareFixtures compares testdata/summary.json with testdata/summary_new.json, where the direct
// cases moved a little (p50 by 4-5%, p99 by 5% and 20%, calls/s by 2-3%), unary-64B/c1/tunnel's p50
// ratio worsened by 32% and its p99 ratio by 20%, unary-1MiB/c16/tunnel's p99 ratio by 21%,
// unary-64B/c1/tunnel-public's throughput ratios improved by 28%, and a new direct case appeared.
func compareFixtures(t *testing.T) Comparison {
	t.Helper()
	newer, err := ReadSummary(filepath.Join("testdata", "summary_new.json"))
	if err != nil {
		t.Fatal(err)
	}
	return Compare(testSummary(t), newer)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-3 }

func TestCompareFlagsBeyondNoise(t *testing.T) {
	c := compareFixtures(t)
	if c.NoiseCases != 2 {
		t.Errorf("noise from %d direct cases, want 2", c.NoiseCases)
	}
	wantNoise := map[Metric]float64{MetricP50: 0.0424, MetricP99: 0.125, MetricCallsPerSec: 0.0255, MetricBytesPerSec: 0.0255}
	wantThreshold := map[Metric]float64{MetricP50: 0.10, MetricP99: 0.25, MetricCallsPerSec: 0.10, MetricBytesPerSec: 0.10}
	for _, m := range Metrics {
		if !near(c.Noise[m], wantNoise[m]) || !near(c.Threshold[m], wantThreshold[m]) {
			t.Errorf("%s: noise %.4f threshold %.4f, want %.4f and %.4f", m, c.Noise[m], c.Threshold[m], wantNoise[m], wantThreshold[m])
		}
	}
	want := map[string]struct{ regressed, improved []Metric }{
		"unary-64B/c1/direct":        {},
		"unary-64B/c1/tunnel":        {regressed: []Metric{MetricP50}}, // p99 +20% is within 2× the p99 noise
		"unary-64B/c1/tunnel-public": {improved: []Metric{MetricCallsPerSec, MetricBytesPerSec}},
		"unary-1MiB/c16/direct":      {},
		"unary-1MiB/c16/tunnel":      {}, // p99 +21%: beyond 10%, but not beyond 2 × 12.5% noise
	}
	if len(c.Cases) != len(want) {
		t.Fatalf("%d cases compared, want %d", len(c.Cases), len(want))
	}
	for _, cc := range c.Cases {
		w := want[cc.Name]
		if !slices.Equal(cc.Regressed, w.regressed) || !slices.Equal(cc.Improved, w.improved) {
			t.Errorf("%s: regressed %v improved %v, want %v and %v", cc.Name, cc.Regressed, cc.Improved, w.regressed, w.improved)
		}
	}
	if r := c.Regressions(); len(r) != 1 || r[0].Name != "unary-64B/c1/tunnel" {
		t.Errorf("regressions %v, want unary-64B/c1/tunnel only", r)
	}
	if w := c.Cases[1].Worsening[MetricP50]; !near(w, 2.7/2.0455-1) {
		t.Errorf("p50 worsening %.4f, want %.4f", w, 2.7/2.0455-1)
	}
	if w := c.Cases[2].Worsening[MetricCallsPerSec]; !near(w, 0.3607/0.46-1) {
		t.Errorf("calls/s worsening %.4f, want %.4f (negative: better)", w, 0.3607/0.46-1)
	}
	if !slices.Equal(c.OnlyNew, []string{"bidi-1KiB/c1/direct"}) || len(c.OnlyOld) != 0 {
		t.Errorf("only new %v only old %v", c.OnlyNew, c.OnlyOld)
	}
}

// TestCompareWithoutDirect: with no direct case in both runs the noise is unknown and 10% applies.
func TestCompareWithoutDirect(t *testing.T) {
	tunneled := func(name string, p50Ratio, callsRatio float64) CaseResult {
		return CaseResult{Name: name, Path: string(PathTunnel), Latency: Latency{P50: 100, P99: 200}, CallsPerSec: 1000, BytesPerSec: 1e6,
			RatioToDirect: &Ratio{P50: p50Ratio, P99: 2, CallsPerSec: callsRatio, BytesPerSec: 0}}
	}
	old := &Summary{Cases: []CaseResult{tunneled("a", 2, 0.5), tunneled("b", 2, 0.5), tunneled("gone", 2, 0.5)}}
	newer := &Summary{Cases: []CaseResult{tunneled("a", 2.22, 0.5), tunneled("b", 2.18, 0.44)}}
	c := Compare(old, newer)
	if c.NoiseCases != 0 || c.Threshold[MetricP50] != CompareMinWorsening {
		t.Errorf("noise cases %d, p50 threshold %v; want 0 and %v", c.NoiseCases, c.Threshold[MetricP50], CompareMinWorsening)
	}
	if a := c.Cases[0]; !slices.Equal(a.Regressed, []Metric{MetricP50}) {
		t.Errorf("a: p50 ratio +11%% not flagged: %v", a.Regressed)
	}
	if b := c.Cases[1]; !slices.Equal(b.Regressed, []Metric{MetricCallsPerSec}) {
		t.Errorf("b: p50 +9%% must pass, calls/s ratio ÷1.14 must be flagged: %v", b.Regressed)
	}
	if _, ok := c.Cases[0].Worsening[MetricBytesPerSec]; ok {
		t.Error("a zero ratio was compared")
	}
	if !slices.Equal(c.OnlyOld, []string{"gone"}) {
		t.Errorf("only old %v", c.OnlyOld)
	}
}

// TestCompareSameRun: a run compared with itself has no noise and nothing to flag.
func TestCompareSameRun(t *testing.T) {
	s := testSummary(t)
	c := Compare(s, s)
	if len(c.Regressions()) != 0 || c.Noise[MetricP99] != 0 {
		t.Errorf("regressions %v, p99 noise %v", c.Regressions(), c.Noise[MetricP99])
	}
	for _, cc := range c.Cases {
		if len(cc.Improved) != 0 {
			t.Errorf("%s improved %v", cc.Name, cc.Improved)
		}
	}
}

func TestWriteComparisonGolden(t *testing.T) {
	c := compareFixtures(t)
	var md, txt bytes.Buffer
	if err := WriteComparison(&md, c); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "compare.golden.md", md.Bytes())
	if err := WriteComparisonTable(&txt, c); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "compare.golden.txt", txt.Bytes())
}

// TestCompareRefusesOtherRuns: runs on another machine or with other settings are shown but not judged;
// a run that shared a busy machine is only warned about.
func TestCompareRefusesOtherRuns(t *testing.T) {
	old := testSummary(t)
	for _, tc := range []struct {
		name   string
		change func(s *Summary)
		want   string
	}{
		{"cpu", func(s *Summary) { s.Env.CPUModel = "Other CPU" }, "CPU “Test CPU @ 2.00GHz” → “Other CPU”"},
		{"cpus", func(s *Summary) { s.Env.CPUs = 8 }, "CPUs 2 → 8"},
		{"kernel", func(s *Summary) { s.Env.Kernel = "6.8.0" }, "kernel 6.1.0-test → 6.8.0"},
		{"duration", func(s *Summary) { s.Settings.DurationS = 4 }, "duration 1s → 4s"},
		{"warm-up", func(s *Summary) { s.Settings.WarmupS = 1 }, "warm-up 0.3s → 1s"},
		{"rounds", func(s *Summary) { s.Settings.Rounds = 4 }, "rounds 2 → 4"},
		{"transport", func(s *Summary) { s.Settings.Transport = "bufconn" }, "transport tcp → bufconn"},
		{"tunnels", func(s *Summary) { s.Settings.TunnelsPerAgent = 4 }, "tunnels per agent 2 → 4"},
		{"target", func(s *Summary) {
			s.Settings.Topology, s.Settings.Transport = TopologyTarget, ""
			s.Settings.Target = &TargetSettings{Address: "kas:8153", Agent: 1, TLS: true}
		}, "target none → kas:8153, agent 1, TLS"},
	} {
		newer := readFixture(t, "summary_new.json")
		tc.change(newer)
		c := Compare(old, newer)
		if len(c.Refused) == 0 || !strings.Contains(strings.Join(c.Refused, "; "), tc.want) {
			t.Errorf("%s: refused %q, want it to say %q", tc.name, c.Refused, tc.want)
		}
		if c.Verdict() != VerdictRefused || len(c.Regressions()) != 0 || len(c.Improvements()) != 0 {
			t.Errorf("%s: verdict %s with %d regressions, %d improvements", tc.name, c.Verdict(), len(c.Regressions()), len(c.Improvements()))
		}
		if !strings.HasPrefix(c.VerdictText(), "REFUSED: ") || c.verdict(c.Cases[1]) != "not judged" {
			t.Errorf("%s: %q, case verdict %q", tc.name, c.VerdictText(), c.verdict(c.Cases[1]))
		}
	}

	newer := readFixture(t, "summary_new.json")
	newer.Env.LoadAvg = []float64{3.5, 2, 1}
	newer.Env.Go = "go1.27"
	c := Compare(old, newer)
	if len(c.Refused) != 0 || c.Verdict() != VerdictRegressed {
		t.Errorf("load and Go version refused the comparison: %q", c.Refused)
	}
	warnings := strings.Join(c.Warnings, "; ")
	for _, want := range []string{"the new run started on a busy machine (load average 3.50 on 2 CPUs)", "Go go1.26.8 → go1.27"} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings %q lack %q", c.Warnings, want)
		}
	}
}

// TestCompareSpread: a ratio that worsened beyond the threshold is still not flagged when the case's
// rounds spread as wide in either run.
func TestCompareSpread(t *testing.T) {
	tunneled := func(p50Ratio, spread float64) *Summary {
		c := CaseResult{Name: "a", Path: string(PathTunnel), Latency: Latency{P50: 100, P99: 200}, CallsPerSec: 1000, BytesPerSec: 1e6,
			RatioToDirect: &Ratio{P50: p50Ratio, P99: 2, CallsPerSec: 0.5, BytesPerSec: 0.5}}
		if spread > 0 {
			c.RatioSpread = &Spread{P50: spread}
		}
		return &Summary{Schema: SummarySchema, Cases: []CaseResult{c}}
	}
	for _, tc := range []struct {
		oldSpread, newSpread float64
		flagged              bool
	}{
		{0, 0, true},      // +15% beyond the 10% threshold
		{0, 0.05, true},   // and beyond a 5% spread
		{0, 0.20, false},  // the new run's rounds spanned 20%
		{0.16, 0, false},  // the old run's 16%
		{0.14, 0.1, true}, // neither spanned 15%
	} {
		c := Compare(tunneled(2, tc.oldSpread), tunneled(2.3, tc.newSpread))
		if got := len(c.Regressions()) == 1; got != tc.flagged {
			t.Errorf("spreads %v, %v: flagged %v, want %v (spread %v)", tc.oldSpread, tc.newSpread, got, tc.flagged, c.Cases[0].Spread)
		}
	}
}

// TestCompareFailedCases: a case that failed in either run is reported as such and not judged, and a
// failed direct case does not count as noise.
func TestCompareFailedCases(t *testing.T) {
	newer := readFixture(t, "summary_new.json")
	newer.Cases[1].Failed = true // unary-64B/c1/tunnel, the regressed one
	newer.Cases[3].Failed = true // unary-1MiB/c16/direct
	c := Compare(testSummary(t), newer)
	// Without the 1 MiB direct case's p99 move (20%) in the noise, the 1 MiB tunnel's p99 ratio (+21%)
	// is beyond the threshold now.
	if r := c.Regressions(); len(r) != 1 || r[0].Name != "unary-1MiB/c16/tunnel" || c.NoiseCases != 1 {
		t.Errorf("regressions %v, noise from %d direct cases; want unary-1MiB/c16/tunnel only and 1", r, c.NoiseCases)
	}
	if v := c.verdict(c.Cases[1]); v != "FAILED in the new run" {
		t.Errorf("verdict %q", v)
	}
	if !strings.Contains(c.VerdictText(), "Not judged, failed in a run: unary-64B/c1/tunnel, unary-1MiB/c16/direct.") {
		t.Errorf("verdict text %q", c.VerdictText())
	}
	// A v1 run did not mark failures: its errors do.
	v1 := readFixture(t, "summary_v1.json")
	c = Compare(v1, v1)
	if !c.Cases[4].OldFailed || c.Cases[0].OldFailed {
		t.Errorf("v1 failures: %v, %v", c.Cases[4].OldFailed, c.Cases[0].OldFailed)
	}
}

// TestCompareReadsBaseline: the committed baseline (results/baseline) is read and compared with itself:
// nothing regresses, and it records its settings, so nothing warns that it does not. Older schemas are
// read from the fixtures (summary_v1.json, TestCompareReadsV2).
func TestCompareReadsBaseline(t *testing.T) {
	base, err := ReadSummary(filepath.Join("..", "results", "baseline"))
	if err != nil {
		t.Fatal(err)
	}
	c := Compare(base, base)
	if len(c.Cases) != len(base.Cases) || c.Verdict() != VerdictNoRegression {
		t.Errorf("%d of %d cases compared, verdict %s", len(c.Cases), len(base.Cases), c.Verdict())
	}
	if base.Settings == nil || strings.Contains(strings.Join(c.Warnings, "; "), "does not record its settings") {
		t.Errorf("settings %v, warnings %q", base.Settings, c.Warnings)
	}
}

// TestComparisonJSONGolden: compare.json holds the verdict, the rule's figures and every case.
func TestComparisonJSONGolden(t *testing.T) {
	c := compareFixtures(t)
	c.OldName, c.NewName = "testdata/summary.json", "testdata/summary_new.json"
	var b bytes.Buffer
	if err := WriteComparisonJSON(&b, c); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "compare.golden.json", b.Bytes())
	var doc struct {
		Schema, Verdict string
		Regressions     int
		Cases           []struct {
			Name      string
			Regressed []string
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != CompareSchema || doc.Verdict != VerdictRegressed || doc.Regressions != 1 || len(doc.Cases) != 5 ||
		!slices.Equal(doc.Cases[1].Regressed, []string{"p50"}) {
		t.Errorf("compare.json %+v", doc)
	}
}

// TestComparisonTerminalWidth: with long case names, warnings and a refusal, no terminal line is wider
// than TerminalWidth.
func TestComparisonTerminalWidth(t *testing.T) {
	old, newer := testSummary(t), readFixture(t, "summary_new.json")
	for _, s := range []*Summary{old, newer} {
		for i := range s.Cases {
			s.Cases[i].Name = strings.Replace(s.Cases[i].Name, "unary-64B/c1", "server-stream-64KiB/c64", 1) + "-single-use"
		}
	}
	newer.Settings.DurationS, newer.Env.CPUModel, newer.Env.LoadAvg = 4, "AMD EPYC 7B13 64-Core Processor", []float64{13.3, 8, 4}
	var b bytes.Buffer
	if err := WriteComparisonTable(&b, Compare(old, newer)); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, b.String())
	if !strings.Contains(b.String(), "REFUSED") || !strings.Contains(b.String(), "WARNING: the new run started on a busy machine") {
		t.Errorf("no refusal or warning:\n%s", b.String())
	}
}

// TestCompareTargetWithoutDirect: a --target run without a direct baseline has no ratios: its own
// figures' changes are shown, nothing is judged, and its failed case says so.
func TestCompareTargetWithoutDirect(t *testing.T) {
	old, newer := targetSummary(t), targetSummary(t)
	newer.Cases[0].Latency.P50 = 264 // +10%
	c := Compare(old, newer)
	if len(c.Refused) != 0 || len(c.Regressions()) != 0 {
		t.Fatalf("refused %q, regressions %v", c.Refused, c.Regressions())
	}
	if got := termChange(c.Cases[0], MetricP50); got != "+10.0%" {
		t.Errorf("p50 change %q, want +10.0%%", got)
	}
	if v, w := c.shortVerdict(c.Cases[0]), c.shortVerdict(c.Cases[1]); v != "no ratio" || w != "FAILED new" {
		t.Errorf("verdicts %q, %q", v, w)
	}
}
