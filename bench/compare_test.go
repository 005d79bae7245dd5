package bench

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
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
