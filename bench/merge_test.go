package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/bench/result"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// hostCase is one case of a synthetic run: latencies in µs, drawn from a known distribution.
func hostCase(t *testing.T, name, path, pair string, samples []int64, elapsed time.Duration, errs map[string]int64) CaseResult {
	t.Helper()
	h := load.NewHistogram()
	for _, v := range samples {
		if err := h.RecordValue(v); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := result.EncodeHistogram(h)
	if err != nil {
		t.Fatal(err)
	}
	var nerr int64
	for _, n := range errs {
		nerr += n
	}
	calls := int64(len(samples))
	return CaseResult{
		Name: name, Path: path, Shape: "unary", PayloadBytes: 64, Concurrency: 4, Mode: "closed", Pair: pair,
		Calls: calls, Errors: nerr, ErrorsByCode: errs,
		CallsPerSec: float64(calls) / elapsed.Seconds(), BytesPerSec: 128 * float64(calls) / elapsed.Seconds(),
		AllocsPerCall: 100, Latency: result.LatencyOf(h), LatencyHDR: enc,
	}
}

// draw returns n latencies in µs: base plus an exponential tail of the given mean.
func draw(r *rand.Rand, n int, base, mean float64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(base + r.ExpFloat64()*mean)
	}
	return out
}

// exactQuantile is quantile q (0..100) of the samples: the value of rank q·n rounded to the nearest,
// as HdrHistogram ranks them.
func exactQuantile(samples []int64, q float64) int64 {
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := min(int(q/100*float64(len(s))+0.5), len(s))
	return s[max(rank, 1)-1]
}

type synthRun struct {
	in             MergeInput
	direct, tunnel []int64
}

// synthRuns are three load hosts of one matrix: a fast one, a slow one with more calls and errors,
// and one in between, started a few seconds apart.
func synthRuns(t *testing.T) []synthRun {
	t.Helper()
	r := rand.New(rand.NewPCG(15, 12))
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var runs []synthRun
	for i, host := range []struct {
		n          int
		base, mean float64
		errs       map[string]int64
	}{
		{2000, 30, 20, nil},
		{6000, 200, 400, map[string]int64{"Unavailable": 7}},
		{3000, 60, 50, map[string]int64{"Unavailable": 1, "DeadlineExceeded": 2}},
	} {
		sr := synthRun{direct: draw(r, host.n, host.base/2, host.mean/2), tunnel: draw(r, host.n, host.base, host.mean)}
		env := Env{Go: "go1.26", GRPC: "v1.80.0", CPUs: 2 + 2*i, OS: "linux", Arch: "amd64", GitCommit: "abc", StartedAt: start.Add(time.Duration(i) * 3 * time.Second), Target: "kas.example:8153"}
		s := &Summary{Schema: SummarySchema, Env: env, Cases: []CaseResult{
			hostCase(t, "unary-64B/c4/direct", "direct", "", sr.direct, 2*time.Second, nil),
			hostCase(t, "unary-64B/c4/tunnel-public", "tunnel-public", "unary-64B/c4/direct", sr.tunnel, 2*time.Second, host.errs),
		}}
		s.Cases[1].Routing = &Routing{P50us: 12, P99us: 40}
		sr.in = MergeInput{Dir: []string{"host-a", "host-b", "host-c"}[i], Summary: s}
		runs = append(runs, sr)
	}
	return runs
}

func inputs(runs []synthRun) []MergeInput {
	out := make([]MergeInput, len(runs))
	for i, r := range runs {
		out[i] = r.in
	}
	return out
}

// TestMergePercentilesOfTheUnion: merged percentiles are those of every host's calls together (within
// the histogram's 0.1% and 1 µs), not an average of the hosts' percentiles; counts and throughputs add
// up; ratios are recomputed.
func TestMergePercentilesOfTheUnion(t *testing.T) {
	runs := synthRuns(t)
	sum, err := Merge(inputs(runs))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Cases) != 2 || len(sum.MergedFrom) != 3 || !sum.Env.StartedAt.Equal(runs[0].in.Summary.Env.StartedAt) {
		t.Fatalf("merged: %d cases, %d runs, started %v", len(sum.Cases), len(sum.MergedFrom), sum.Env.StartedAt)
	}
	for ci, pick := range []func(synthRun) []int64{func(r synthRun) []int64 { return r.direct }, func(r synthRun) []int64 { return r.tunnel }} {
		c := sum.Cases[ci]
		var union []int64
		var avgP99 float64
		for _, r := range runs {
			union = append(union, pick(r)...)
			avgP99 += float64(r.in.Summary.Cases[ci].Latency.P99) / float64(len(runs))
		}
		for _, q := range []struct {
			q   float64
			got int64
		}{{50, c.Latency.P50}, {90, c.Latency.P90}, {99, c.Latency.P99}, {99.9, c.Latency.P999}, {100, c.Latency.Max}} {
			want := exactQuantile(union, q.q)
			if math.Abs(float64(q.got-want)) > 0.001*float64(want)+1 {
				t.Errorf("%s p%v = %d µs, union of samples %d µs", c.Name, q.q, q.got, want)
			}
		}
		if math.Abs(float64(c.Latency.P99)-avgP99) < 0.05*avgP99 {
			t.Errorf("%s: p99 %d is the average of the hosts' p99 (%.0f): the fixture cannot tell merging from averaging", c.Name, c.Latency.P99, avgP99)
		}
		h, err := result.DecodeHistogram(c.LatencyHDR)
		if err != nil || h.TotalCount() != int64(len(union)) || c.Calls != int64(len(union)) {
			t.Errorf("%s: merged histogram %v (%v), calls %d, want %d", c.Name, h.TotalCount(), err, c.Calls, len(union))
		}
		if want := float64(len(union)) / 2; math.Abs(c.CallsPerSec-want) > 1e-9 || math.Abs(c.BytesPerSec-128*want) > 1e-6 {
			t.Errorf("%s: %v calls/s, %v B/s, want the hosts' sum %v, %v", c.Name, c.CallsPerSec, c.BytesPerSec, want, 128*want)
		}
	}
	tun := sum.Cases[1]
	if tun.Errors != 10 || tun.ErrorsByCode["Unavailable"] != 8 || tun.ErrorsByCode["DeadlineExceeded"] != 2 {
		t.Errorf("errors %d %v", tun.Errors, tun.ErrorsByCode)
	}
	if tun.Routing != nil || sum.Scale != nil {
		t.Errorf("routing %+v or scale %+v merged", tun.Routing, sum.Scale)
	}
	want := float64(tun.Latency.P50) / float64(sum.Cases[0].Latency.P50)
	if tun.RatioToDirect == nil || tun.RatioToDirect.P50 != want || sum.Cases[0].RatioToDirect != nil {
		t.Errorf("ratio %+v, want p50 %v", tun.RatioToDirect, want)
	}
	if w := MergeWarnings(sum); w != nil {
		t.Errorf("runs 3 s apart: %v", w)
	}

	var b strings.Builder
	if err := WriteMarkdown(&b, sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Merged by `tunnelbench merge` from 3 runs", "| host-b | 2026-03-01 10:00:03 UTC | linux/amd64, 4 CPUs |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report.md lacks %q:\n%s", want, b.String())
		}
	}
}

// TestMergeRefuses: every run that cannot be merged is refused with what is wrong and where.
func TestMergeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(runs []MergeInput) []MergeInput
		want   string
	}{
		{"one run", func(r []MergeInput) []MergeInput { return r[:1] }, "merge needs at least two runs, got 1"},
		{"other matrix", func(r []MergeInput) []MergeInput {
			r[2].Summary.Cases[1].Name = "unary-1MiB/c4/tunnel-public"
			return r
		}, "host-a and host-c are runs of different matrices: cases only in the first: unary-64B/c4/tunnel-public; only in the second: unary-1MiB/c4/tunnel-public"},
		{"fewer cases", func(r []MergeInput) []MergeInput {
			r[1].Summary.Cases = r[1].Summary.Cases[:1]
			return r
		}, "cases only in the first: unary-64B/c4/tunnel-public; only in the second: none"},
		{"quick", func(r []MergeInput) []MergeInput { r[1].Summary.Env.Quick = true; return r }, "host-a and host-b ran with different settings: quick false vs true"},
		{"target", func(r []MergeInput) []MergeInput { r[1].Summary.Env.Target = ""; return r }, `target "kas.example:8153" vs (none)`},
		{"mode", func(r []MergeInput) []MergeInput { r[1].Summary.Cases[0].Mode = "open"; return r }, "case unary-64B/c4/direct mode closed vs open"},
		{"no histogram", func(r []MergeInput) []MergeInput { r[2].Summary.Cases[1].LatencyHDR = ""; return r },
			"host-c: case unary-64B/c4/tunnel-public has no latency histogram (latency_hdr): the run predates tunnelbench merge"},
		{"bad histogram", func(r []MergeInput) []MergeInput { r[0].Summary.Cases[0].LatencyHDR = "bm9wZQ=="; return r }, "host-a: case unary-64B/c4/direct: latency histogram:"},
		{"histogram of another case", func(r []MergeInput) []MergeInput {
			r[0].Summary.Cases[0].LatencyHDR = r[1].Summary.Cases[0].LatencyHDR
			return r
		}, "host-a: case unary-64B/c4/direct: the latency histogram holds 6000 calls, the case 2000"},
		{"same run twice", func(r []MergeInput) []MergeInput {
			return append(r, MergeInput{Dir: "copy-of-a", Summary: r[0].Summary})
		}, "host-a and copy-of-a are the same run"},
		{"same dir twice", func(r []MergeInput) []MergeInput {
			r[1].Dir = "host-a/"
			return r
		}, "host-a and host-a/ are the same run"},
		{"merged", func(r []MergeInput) []MergeInput { r[1].Summary.MergedFrom = []MergedRun{{}, {}}; return r }, "host-b is already a merge of 2 runs"},
		{"no cases", func(r []MergeInput) []MergeInput { r[1].Summary.Cases = nil; return r }, "host-b has no cases to merge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Merge(tc.change(inputs(synthRuns(t))))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// TestMergeWarnsApart: runs that did not overlap are merged, with a warning in report.md.
func TestMergeWarnsApart(t *testing.T) {
	in := inputs(synthRuns(t))
	in[2].Summary.Env.StartedAt = in[2].Summary.Env.StartedAt.Add(time.Hour)
	sum, err := Merge(in)
	if err != nil {
		t.Fatal(err)
	}
	w := MergeWarnings(sum)
	if len(w) != 1 || !strings.Contains(w[0], "host-c started 1h0m6s after host-a") {
		t.Fatalf("warnings %q", w)
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, sum); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "**Warning:** the runs did not start together") {
		t.Errorf("report.md lacks the warning:\n%s", b.String())
	}
}

// TestMergeRealRuns merges two real runs of a tiny matrix: the merged case holds both runs' calls and
// its percentiles are those of the two histograms together.
func TestMergeRealRuns(t *testing.T) {
	testtier.Full(t, "runs the bench matrix twice")
	opts := Options{
		Matrix:   Matrix{Paths: []Path{PathDirect, PathTunnel}, Shapes: []ShapeSpec{{load.ShapeUnary, 64}}, Concurrency: []int{2}},
		Duration: 200 * time.Millisecond,
		Rounds:   1,
	}
	a, b := tinyRun(t, opts), tinyRun(t, opts)
	sum, err := Merge([]MergeInput{{Dir: "a", Summary: a}, {Dir: "b", Summary: b}})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range sum.Cases {
		ha, err := result.DecodeHistogram(a.Cases[i].LatencyHDR)
		if err != nil {
			t.Fatal(err)
		}
		hb, err := result.DecodeHistogram(b.Cases[i].LatencyHDR)
		if err != nil {
			t.Fatal(err)
		}
		ha.Merge(hb)
		if c.Calls != a.Cases[i].Calls+b.Cases[i].Calls || c.Calls == 0 || c.Latency != result.LatencyOf(ha) {
			t.Errorf("%s: %d calls (%d + %d), latency %+v, want %+v", c.Name, c.Calls, a.Cases[i].Calls, b.Cases[i].Calls, c.Latency, result.LatencyOf(ha))
		}
	}
	if sum.Cases[1].RatioToDirect == nil {
		t.Error("the tunneled case has no ratio")
	}
	// A real kas's routing percentiles come from its exponential histogram.
	if r := a.Cases[1].Routing; r == nil || r.Source != "tunnel_routing_duration_exponential_seconds" || r.P50us <= 0 || r.ResolutionPct > 5 {
		t.Errorf("routing of a real run: %+v", r)
	}
}
