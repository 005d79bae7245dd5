package load

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// exactQuantile is the nearest-rank quantile (q in 0..100) of sorted values.
func exactQuantile(sorted []int64, q float64) int64 {
	i := int(math.Ceil(q/100*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func within(t *testing.T, what string, got, want int64, tol float64) {
	t.Helper()
	if d := math.Abs(float64(got-want)) / float64(want); d > tol {
		t.Errorf("%s = %d, want %d ± %.1f%% (off by %.2f%%)", what, got, want, tol*100, d*100)
	}
}

// TestHistogramQuantiles feeds known latencies, from 1 µs to 60 s, into recorders split like workers
// and checks that the merged quantiles match the exact ones within 1%.
func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200_000
	values := make([]int64, n)
	rs := []*recorder{newRecorder(), newRecorder(), newRecorder()}
	for i := range values {
		// Log-uniform between 1 µs and 60 s, so every decade is exercised.
		us := int64(math.Exp(rng.Float64() * math.Log(60e6)))
		values[i] = max(us, 1)
		rs[i%len(rs)].record(time.Duration(values[i])*time.Microsecond, 10, nil)
	}
	slices.Sort(values)
	res := merge(rs, time.Second, 0)
	if res.Calls != n || res.Bytes != 10*n || res.Errors != 0 {
		t.Fatalf("calls %d bytes %d errors %d, want %d %d 0", res.Calls, res.Bytes, res.Errors, n, 10*n)
	}
	for _, q := range []float64{1, 10, 50, 90, 99, 99.9, 99.99} {
		within(t, "p"+strconv.FormatFloat(q, 'f', -1, 64), res.Quantile(q), exactQuantile(values, q), 0.01)
	}
	within(t, "max", res.Latency.Max(), values[n-1], 0.01)
	within(t, "min", res.Latency.Min(), values[0], 0.01)
}

// TestHistogramUniform: 1..10000 µs once each has p50 5000, p90 9000, p99 9900.
func TestHistogramUniform(t *testing.T) {
	r := newRecorder()
	for us := 1; us <= 10000; us++ {
		r.record(time.Duration(us)*time.Microsecond, 0, nil)
	}
	res := merge([]*recorder{r}, time.Second, 0)
	within(t, "p50", res.Quantile(50), 5000, 0.01)
	within(t, "p90", res.Quantile(90), 9000, 0.01)
	within(t, "p99", res.Quantile(99), 9900, 0.01)
	within(t, "max", res.Latency.Max(), 10000, 0.01)
}

// TestHistogramClamps: latencies outside the histogram's range are clamped, never dropped.
func TestHistogramClamps(t *testing.T) {
	r := newRecorder()
	r.record(0, 0, nil)
	r.record(300*time.Nanosecond, 0, nil)
	r.record(time.Hour, 0, nil)
	res := merge([]*recorder{r}, time.Second, 0)
	if got := res.Latency.TotalCount(); got != 3 {
		t.Fatalf("recorded %d values, want 3", got)
	}
	if got := res.Latency.Min(); got != histMin {
		t.Errorf("min %d µs, want %d", got, histMin)
	}
	within(t, "max", res.Latency.Max(), histMax, 0.001)
}

// TestResultAdd: folding runs adds counts and histograms; failed calls count as calls and errors, never
// as bytes or calls/s.
func TestResultAdd(t *testing.T) {
	a, b := newRecorder(), newRecorder()
	for i := range 100 {
		a.record(time.Millisecond, 1, nil)
		b.record(3*time.Millisecond, 2, errIf(i%10 == 0))
	}
	ra := merge([]*recorder{a}, time.Second, 100)
	rb := merge([]*recorder{b}, time.Second, 300)
	rb.Missed, rb.ByHTTPStatus = 4, map[int]int64{200: 90, 503: 10}
	ra.Add(rb)
	if ra.Calls != 200 || ra.Errors != 10 || ra.OK() != 190 || ra.Bytes != 100+90*2 || ra.Elapsed != 2*time.Second || ra.Missed != 4 {
		t.Fatalf("after Add: %+v", ra)
	}
	if ra.AllocsPerCall != 2 {
		t.Errorf("allocs/call %v, want 2", ra.AllocsPerCall)
	}
	if ra.ByHTTPStatus[503] != 10 || ra.ByHTTPStatus[200] != 90 {
		t.Errorf("by HTTP status %v", ra.ByHTTPStatus)
	}
	within(t, "p25", ra.Quantile(25), 1000, 0.01)
	within(t, "p75", ra.Quantile(75), 3000, 0.01)
	if got := ra.CallsPerSecond(); got != 95 {
		t.Errorf("calls/s %v, want 95 (successful calls only)", got)
	}
	if got := ra.BytesPerSecond(); got != 140 {
		t.Errorf("bytes/s %v, want 140 (successful calls only)", got)
	}
}
