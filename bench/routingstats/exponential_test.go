package routingstats

import (
	"context"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing"
)

// otelKas records routing durations as kas does: the seed's bucketed histogram and its exponential
// twin, on a provider that aggregates the twin as kas.NewMetrics's does.
type otelKas struct {
	p             *metrics.Provider
	buckets, expo metric.Float64Histogram
}

func newOtelKas(t *testing.T, withExp bool) *otelKas {
	t.Helper()
	var opts []metrics.Option
	if withExp {
		opts = append(opts, metrics.WithExponentialHistograms(routing.RoutingDurationExponentialMetric))
	}
	p, err := metrics.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	m := p.Meter("test")
	k := &otelKas{p: p}
	if k.buckets, err = m.Float64Histogram(routing.RoutingDurationMetric, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(routing.RoutingDurationBuckets...)); err != nil {
		t.Fatal(err)
	}
	if withExp {
		if k.expo, err = m.Float64Histogram(routing.RoutingDurationExponentialMetric, metric.WithUnit("s")); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

var success = metric.WithAttributes(attribute.String("status", "success"))

// routed records n routings of d, and one aborted routing that the figures must leave out.
func (k *otelKas) routed(n int, d time.Duration) {
	for range n {
		k.buckets.Record(context.Background(), d.Seconds(), success)
		if k.expo != nil {
			k.expo.Record(context.Background(), d.Seconds(), success)
		}
	}
	aborted := metric.WithAttributes(attribute.String("status", "aborted"))
	k.buckets.Record(context.Background(), 0.000001, aborted)
	if k.expo != nil {
		k.expo.Record(context.Background(), 0.000001, aborted)
	}
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }

// TestKnownDurations: routings of 37 µs, 120 µs and 2.5 ms come out within 5% at p50 and p99 (and
// p90), through the OpenTelemetry SDK and its Prometheus exporter as kas records them; the seed's
// buckets alone could not tell 37 µs from 500 µs.
func TestKnownDurations(t *testing.T) {
	for _, tc := range []struct {
		name             string
		n37, n120, n2500 int
		p50, p90, p99    time.Duration
	}{
		{"mostly 37µs", 60, 30, 10, 37 * time.Microsecond, 120 * time.Microsecond, 2500 * time.Microsecond},
		{"mostly 120µs", 20, 75, 5, 120 * time.Microsecond, 120 * time.Microsecond, 2500 * time.Microsecond},
		{"tail at p99", 900, 89, 11, 37 * time.Microsecond, 37 * time.Microsecond, 2500 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newOtelKas(t, true)
			gs := []prometheus.Gatherer{k.p.Registry()}
			k.routed(3, time.Second) // before the interval: not counted
			before := Take(gs)
			k.routed(tc.n37, 37*time.Microsecond)
			k.routed(tc.n120, 120*time.Microsecond)
			k.routed(tc.n2500, 2500*time.Microsecond)
			var tot Total
			tot.Add(before, Take(gs))
			if src, relErr := tot.Source(); src != ExponentialMetric || relErr <= 0 || relErr > 0.05 {
				t.Fatalf("source %q, relative error %v", src, relErr)
			}
			if got, want := tot.Exp.Total(), uint64(tc.n37+tc.n120+tc.n2500); got != want {
				t.Errorf("exponential histogram holds %d routings, want %d", got, want)
			}
			for _, q := range []struct {
				q    float64
				want time.Duration
			}{{0.5, tc.p50}, {0.9, tc.p90}, {0.99, tc.p99}} {
				if got := tot.Quantile(q.q); !within(got, q.want.Seconds(), 0.05) {
					t.Errorf("p%v = %v µs, want %v within 5%%", q.q*100, got*1e6, q.want)
				}
			}
			// What the report used to say: the 1 ms-wide first bucket puts a 37 µs median near 500 µs.
			if tc.p50 == 37*time.Microsecond {
				seedOnly := Total{Bounds: tot.Bounds, Counts: tot.Counts}
				if got := seedOnly.Quantile(0.5); within(got, tc.p50.Seconds(), 0.05) {
					t.Errorf("the seed's buckets read p50 %v µs: the exponential histogram would not be needed", got*1e6)
				}
			}
		})
	}
}

// TestOlderKas: when one kas lacks the exponential histogram, the figures come from every kas's
// buckets, and say so, rather than from some kas only.
func TestOlderKas(t *testing.T) {
	newer, older := newOtelKas(t, true), newOtelKas(t, false)
	gs := []prometheus.Gatherer{newer.p.Registry(), older.p.Registry()}
	before := Take(gs)
	newer.routed(10, 37*time.Microsecond)
	older.routed(10, 37*time.Microsecond)
	after := Take(gs)
	if after.Exp != nil {
		t.Errorf("a sample with an older kas has an exponential histogram of %d routings", after.Exp.Total())
	}
	var tot Total
	tot.Add(before, after)
	if src, _ := tot.Source(); src != DurationMetric {
		t.Errorf("source %q, want %q", src, DurationMetric)
	}
	// A histogram present at the end of an interval but not at its start (with the buckets there)
	// cannot be differenced: the total falls back for good.
	var mixed Total
	mixed.Add(Sample{Bounds: after.Bounds, Counts: after.Counts}, Take(gs[:1]))
	mixed.Add(Take(gs[:1]), Take(gs[:1]))
	if mixed.Exponential() != nil {
		t.Error("a total with an interval lacking the exponential histogram reads it")
	}
}

// TestTwoKasSummed: the exponential histograms of two kas add up, at the coarser of their schemas.
func TestTwoKasSummed(t *testing.T) {
	a, b := newOtelKas(t, true), newOtelKas(t, true)
	gs := []prometheus.Gatherer{a.p.Registry(), b.p.Registry()}
	before := Take(gs)
	a.routed(50, 37*time.Microsecond)
	b.routed(49, 120*time.Microsecond)
	b.routed(1, 10*time.Second) // widens b's range: b downscales, a does not
	var tot Total
	tot.Add(before, Take(gs))
	if tot.Exp == nil || tot.Exp.Total() != 100 {
		t.Fatalf("exponential total %+v, want 100 routings", tot.Exp)
	}
	if got := tot.Quantile(0.25); !within(got, 37e-6, 0.05) {
		t.Errorf("p25 %v µs, want 37", got*1e6)
	}
	if got := tot.Quantile(0.75); !within(got, 120e-6, 0.05) {
		t.Errorf("p75 %v µs, want 120", got*1e6)
	}
}

// TestExponentialOf reads a native histogram's spans and deltas (and a float histogram's counts).
func TestExponentialOf(t *testing.T) {
	span := func(off int32, n uint32) *dto.BucketSpan {
		return &dto.BucketSpan{Offset: proto.Int32(off), Length: proto.Uint32(n)}
	}
	h := &dto.Histogram{
		Schema: proto.Int32(2), ZeroCount: proto.Uint64(1), ZeroThreshold: proto.Float64(1e-9),
		PositiveSpan:  []*dto.BucketSpan{span(-3, 2), span(2, 1)},
		PositiveDelta: []int64{4, -1, -3}, // buckets -3: 4, -2: 3, 1: 0
	}
	e := exponentialOf(h)
	if want := map[int]uint64{-3: 4, -2: 3}; !maps.Equal(e.Counts, want) || e.ZeroCount != 1 || e.Schema != 2 || e.Total() != 8 {
		t.Errorf("got %+v, want counts %v", e, want)
	}
	h.PositiveDelta, h.PositiveCount = nil, []float64{2, 0, 5}
	if want := map[int]uint64{-3: 2, 1: 5}; !maps.Equal(exponentialOf(h).Counts, want) {
		t.Errorf("float histogram: %v, want %v", exponentialOf(h).Counts, want)
	}
	if exponentialOf(&dto.Histogram{}) != nil {
		t.Error("a classic histogram read as exponential")
	}
}

// TestDownscale: bucket i at schema 3 lands in the schema-1 bucket that holds its bounds.
func TestDownscale(t *testing.T) {
	e := &Exponential{Schema: 3, Counts: map[int]uint64{-4: 1, -3: 2, 0: 3, 1: 4, 4: 5, 5: 6, 8: 7}}
	got := e.downscaled(1).Counts
	if want := map[int]uint64{-1: 1, 0: 5, 1: 9, 2: 13}; !maps.Equal(got, want) {
		t.Errorf("downscaled %v, want %v", got, want)
	}
	for i := range e.Counts {
		lo, hi := math.Exp2(float64(i-1)/8), math.Exp2(float64(i)/8)
		j := (i-1)>>2 + 1
		if clo, chi := math.Exp2(float64(j-1)/2), math.Exp2(float64(j)/2); lo < clo-1e-12 || hi > chi+1e-12 {
			t.Errorf("bucket %d (%v, %v] is not inside coarse bucket %d (%v, %v]", i, lo, hi, j, clo, chi)
		}
	}
	// Subtracting an earlier reading at a finer schema, and a bucket that went down, never negative.
	later := &Exponential{Schema: 1, Counts: map[int]uint64{0: 10, 1: 1}}
	later.sub(&Exponential{Schema: 3, Counts: map[int]uint64{-3: 2, 0: 3, 1: 4}})
	if want := map[int]uint64{0: 5}; !maps.Equal(later.Counts, want) {
		t.Errorf("sub: %v, want %v", later.Counts, want)
	}
}

// TestExponentialQuantileEdges: empty, all at zero, and the rank at a bucket's end.
func TestExponentialQuantileEdges(t *testing.T) {
	if (&Exponential{Counts: map[int]uint64{}}).Quantile(0.5) != 0 {
		t.Error("an empty histogram has a median")
	}
	if got := (&Exponential{ZeroCount: 3, ZeroThreshold: 1e-9}).Quantile(0.99); got != 1e-9 {
		t.Errorf("all at zero: %v", got)
	}
	// Schema 0: bucket 1 is (1, 2]; the whole bucket's p100 is its upper bound.
	if got := (&Exponential{Counts: map[int]uint64{1: 4}}).Quantile(1); got != 2 {
		t.Errorf("p100 %v, want 2", got)
	}
}
