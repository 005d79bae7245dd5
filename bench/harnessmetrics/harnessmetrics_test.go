package harnessmetrics_test

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

func newMetrics(t *testing.T) (*harnessmetrics.Metrics, *metrics.Provider) {
	t.Helper()
	p, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(t.Context()) })
	m, err := harnessmetrics.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return m, p
}

// series returns the metric of mf whose labels are exactly labels (name, value, name, value, ...).
func series(t *testing.T, mf *dto.MetricFamily, labels ...string) *dto.Metric {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if len(got) == len(want) && func() bool {
			for k, v := range want {
				if got[k] != v {
					return false
				}
			}
			return true
		}() {
			return m
		}
	}
	t.Fatalf("%s has no series %v", mf.GetName(), labels)
	return nil
}

func labelSets(mf *dto.MetricFamily) []string {
	var out []string
	for _, m := range mf.GetMetric() {
		var parts []string
		for _, lp := range m.GetLabel() {
			parts = append(parts, lp.GetName()+"="+lp.GetValue())
		}
		out = append(out, strings.Join(parts, ","))
	}
	sort.Strings(out)
	return out
}

func TestTypesAndNames(t *testing.T) {
	m, p := newMetrics(t)
	m.Offered("s", 1)
	m.Call("s", time.Millisecond, codes.OK)
	m.Fault("s", "agent-kas", "latency", true)
	m.Recovery("s", time.Second)
	want := map[string]dto.MetricType{
		harnessmetrics.OfferedCallsMetric: dto.MetricType_COUNTER,
		harnessmetrics.CallsMetric:        dto.MetricType_COUNTER,
		harnessmetrics.CallDurationMetric: dto.MetricType_HISTOGRAM,
		harnessmetrics.FaultActiveMetric:  dto.MetricType_GAUGE,
		harnessmetrics.RecoveryMetric:     dto.MetricType_GAUGE,
	}
	got := testenv.Scrape(t, p)
	if len(got) != len(want) {
		t.Errorf("gathered %d families, want %d", len(got), len(want))
	}
	for name, typ := range want {
		mf, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if mf.GetType() != typ {
			t.Errorf("%s is a %v, want %v", name, mf.GetType(), typ)
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s has no help", name)
		}
	}
}

func TestCallsByCode(t *testing.T) {
	m, p := newMetrics(t)
	m.Offered("steady", 5)
	m.Offered("steady", 2)
	m.Offered("steady", 0)
	m.Offered("steady", -3)
	for range 4 {
		m.Call("steady", 2*time.Millisecond, codes.OK)
	}
	m.Call("steady", 20*time.Second, codes.DeadlineExceeded)
	m.Call("steady", 300*time.Microsecond, codes.Unavailable)
	m.Call("steady", time.Millisecond, codes.Code(42))
	m.Offered("idle", 1)

	mfs := testenv.Scrape(t, p)
	if got := series(t, mfs[harnessmetrics.OfferedCallsMetric], "scenario", "steady").GetCounter().GetValue(); got != 7 {
		t.Errorf("offered steady = %v, want 7", got)
	}
	calls := mfs[harnessmetrics.CallsMetric]
	for code, want := range map[string]float64{"OK": 4, "DeadlineExceeded": 1, "Unavailable": 1, "Code(42)": 1} {
		if got := series(t, calls, "scenario", "steady", "code", code).GetCounter().GetValue(); got != want {
			t.Errorf("calls steady %s = %v, want %v", code, got, want)
		}
	}
	// Codes that never happened have no series; OK exists from the first use of a scenario.
	wantSets := []string{
		"code=Code(42),scenario=steady", "code=DeadlineExceeded,scenario=steady", "code=OK,scenario=idle",
		"code=OK,scenario=steady", "code=Unavailable,scenario=steady",
	}
	if got := labelSets(calls); !slices.Equal(got, wantSets) {
		t.Errorf("calls series %v, want %v", got, wantSets)
	}
	if got := series(t, calls, "scenario", "idle", "code", "OK").GetCounter().GetValue(); got != 0 {
		t.Errorf("calls idle OK = %v, want 0", got)
	}

	h := series(t, mfs[harnessmetrics.CallDurationMetric], "scenario", "steady").GetHistogram()
	if h.GetSampleCount() != 7 {
		t.Errorf("duration count %d, want 7", h.GetSampleCount())
	}
	if want := 4*0.002 + 20 + 0.0003 + 0.001; abs(h.GetSampleSum()-want) > 1e-9 {
		t.Errorf("duration sum %v, want %v", h.GetSampleSum(), want)
	}
	var bounds []float64
	cum := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	if !slices.Equal(bounds, harnessmetrics.DurationBuckets) {
		t.Errorf("buckets %v, want %v", bounds, harnessmetrics.DurationBuckets)
	}
	for le, want := range map[float64]uint64{0.0002: 0, 0.0003: 1, 0.001: 2, 0.002: 6, 15: 6, 20: 7, 60: 7} {
		if cum[le] != want {
			t.Errorf("bucket le=%v holds %d, want %d", le, cum[le], want)
		}
	}
}

func TestDurationBuckets(t *testing.T) {
	b := harnessmetrics.DurationBuckets
	if b[0] > 100e-6 || b[len(b)-1] < 60 {
		t.Errorf("buckets span %v..%v, want 100µs..60s at least", b[0], b[len(b)-1])
	}
	for i := 1; i < len(b); i++ {
		if r := b[i] / b[i-1]; r <= 1 || r > 1.7 {
			t.Errorf("bucket %v follows %v: ratio %v, want within (1, 1.7]", b[i], b[i-1], r)
		}
	}
}

func TestFaultAndRecovery(t *testing.T) {
	m, p := newMetrics(t)
	m.Fault("kill", "kas-0", "kill", true)
	m.Fault("kill", "agent-1>kas-0", "latency", true)
	m.Fault("kill", "kas-0", "kill", false)
	m.Recovery("kill", 1500*time.Millisecond)
	m.Recovery("kill", 2500*time.Millisecond)

	mfs := testenv.Scrape(t, p)
	fault := mfs[harnessmetrics.FaultActiveMetric]
	if got := series(t, fault, "scenario", "kill", "link", "kas-0", "fault", "kill").GetGauge().GetValue(); got != 0 {
		t.Errorf("kill fault = %v, want 0", got)
	}
	if got := series(t, fault, "scenario", "kill", "link", "agent-1>kas-0", "fault", "latency").GetGauge().GetValue(); got != 1 {
		t.Errorf("latency fault = %v, want 1", got)
	}
	if got := series(t, mfs[harnessmetrics.RecoveryMetric], "scenario", "kill").GetGauge().GetValue(); got != 2.5 {
		t.Errorf("recovery = %v, want 2.5 (the last one)", got)
	}

	// A scenario that relapsed has no recovery figure; the others keep theirs.
	m.Recovery("other", time.Second)
	m.NoRecovery("kill")
	mfs = testenv.Scrape(t, p)
	if got := labelSets(mfs[harnessmetrics.RecoveryMetric]); !slices.Equal(got, []string{"scenario=other"}) {
		t.Errorf("recovery series after NoRecovery(kill): %v", got)
	}
}

func TestNilRecordsNothing(t *testing.T) {
	var m *harnessmetrics.Metrics
	m.Offered("s", 1)
	m.Call("s", time.Second, codes.OK)
	m.Fault("s", "l", "f", true)
	m.Recovery("s", time.Second)
	m.NoRecovery("s")
}

func TestRegisterTwiceFails(t *testing.T) {
	_, p := newMetrics(t)
	if _, err := harnessmetrics.New(p); err == nil {
		t.Fatal("second New on the same registry succeeded")
	}
}

func TestConcurrentCalls(t *testing.T) {
	m, p := newMetrics(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				m.Offered("c", 1)
				m.Call("c", time.Duration(i)*time.Microsecond, codes.Code(g%3))
			}
		})
	}
	wg.Wait()
	mfs := testenv.Scrape(t, p)
	var total float64
	for _, s := range mfs[harnessmetrics.CallsMetric].GetMetric() {
		total += s.GetCounter().GetValue()
	}
	if total != 8000 {
		t.Errorf("calls total %v, want 8000", total)
	}
	if got := series(t, mfs[harnessmetrics.OfferedCallsMetric], "scenario", "c").GetCounter().GetValue(); got != 8000 {
		t.Errorf("offered %v, want 8000", got)
	}
	if got := series(t, mfs[harnessmetrics.CallDurationMetric], "scenario", "c").GetHistogram().GetSampleCount(); got != 8000 {
		t.Errorf("duration count %v, want 8000", got)
	}
}

func TestCallDoesNotAllocate(t *testing.T) {
	m, _ := newMetrics(t)
	m.Call("hot", time.Millisecond, codes.Unavailable) // creates the children
	allocs := testing.AllocsPerRun(1000, func() {
		m.Offered("hot", 1)
		m.Call("hot", time.Millisecond, codes.OK)
		m.Call("hot", time.Millisecond, codes.Unavailable)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per recorded call, want 0", allocs)
	}
}

func BenchmarkCall(b *testing.B) {
	p, err := metrics.New()
	if err != nil {
		b.Fatal(err)
	}
	m, err := harnessmetrics.New(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Call("bench", time.Millisecond, codes.OK)
		}
	})
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// failThird registers on a real registry but refuses the third collector.
type failThird struct {
	*prometheus.Registry
	n int
}

func (f *failThird) Register(c prometheus.Collector) error {
	if f.n++; f.n == 3 {
		return errors.New("refused")
	}
	return f.Registry.Register(c)
}

func TestFailedRegistrationLeavesNothing(t *testing.T) {
	reg := &failThird{Registry: prometheus.NewRegistry()}
	if _, err := harnessmetrics.NewOn(reg); err == nil {
		t.Fatal("NewOn succeeded despite a refused collector")
	}
	// Registering again succeeds only if the first two collectors did not stay behind.
	if _, err := harnessmetrics.NewOn(reg.Registry); err != nil {
		t.Fatalf("NewOn after a failed one: %v", err)
	}
}
