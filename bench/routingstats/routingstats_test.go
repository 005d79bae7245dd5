package routingstats

import (
	"math"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// kasMetrics is one kas's routing metrics on a registry of its own.
type kasMetrics struct {
	reg      *prometheus.Registry
	duration *prometheus.HistogramVec
	timeouts prometheus.Counter
}

func newKas(t *testing.T) kasMetrics {
	t.Helper()
	k := kasMetrics{
		reg:      prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: DurationMetric, Buckets: []float64{0.001, 0.004, 0.016}}, []string{"status"}),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: TimeoutsMetric}),
	}
	k.reg.MustRegister(k.duration, k.timeouts)
	return k
}

// TestSince: two kas summed, failed routings left out, what happened between two samples.
func TestSince(t *testing.T) {
	a, b := newKas(t), newKas(t)
	gs := []prometheus.Gatherer{a.reg, b.reg}
	a.duration.WithLabelValues("success").Observe(0.0005)
	before := Take(gs)
	a.duration.WithLabelValues("success").Observe(0.002)
	b.duration.WithLabelValues("success").Observe(0.002)
	b.duration.WithLabelValues("success").Observe(1)
	b.duration.WithLabelValues("timeout").Observe(0.002)
	a.timeouts.Add(2)
	after := Take(gs)
	bounds, counts, timeouts := after.Since(before)
	if !slices.Equal(bounds, []float64{0.001, 0.004, 0.016}) || !slices.Equal(counts, []uint64{0, 2, 0, 1}) || timeouts != 2 {
		t.Errorf("since: bounds %v counts %v timeouts %d", bounds, counts, timeouts)
	}
	if b, c, to := Take(nil).Since(Sample{}); b != nil || c != nil || to != 0 {
		t.Errorf("no kas: %v %v %d", b, c, to)
	}
}

// TestTotal: intervals add up, and the quantiles interpolate inside buckets.
func TestTotal(t *testing.T) {
	k := newKas(t)
	gs := []prometheus.Gatherer{k.reg}
	var tot Total
	for range 2 {
		before := Take(gs)
		for range 5 {
			k.duration.WithLabelValues("success").Observe(0.002)
		}
		k.duration.WithLabelValues("success").Observe(0.0005)
		tot.Add(before, Take(gs))
	}
	if _, counts := tot.PerBucket(); !slices.Equal(counts, []uint64{2, 10, 0, 0}) {
		t.Errorf("counts %v", counts)
	}
	// The median's rank (6 of 12) is the 4th of 10 in 1ms..4ms.
	if got, want := tot.Quantile(0.5), 0.001+0.003*4/10; math.Abs(got-want) > 1e-12 {
		t.Errorf("median %v, want %v", got, want)
	}
	bounds, counts := tot.PerBucket()
	if got := BucketQuantile(0.5, bounds, counts); got != tot.Quantile(0.5) {
		t.Errorf("BucketQuantile %v, Quantile %v", got, tot.Quantile(0.5))
	}
	if (&Total{}).Quantile(0.5) != 0 || BucketQuantile(0.5, nil, nil) != 0 {
		t.Error("an empty histogram has a quantile")
	}
}

// TestScrapedInfBucket: a scraped histogram's explicit +Inf bucket is not a bound.
func TestScrapedInfBucket(t *testing.T) {
	b := func(le float64, n uint64) *dto.Bucket {
		return &dto.Bucket{UpperBound: proto.Float64(le), CumulativeCount: proto.Uint64(n)}
	}
	fam := &dto.MetricFamily{Name: proto.String(DurationMetric), Type: dto.MetricType_HISTOGRAM.Enum(), Metric: []*dto.Metric{{
		Label:     []*dto.LabelPair{{Name: proto.String("status"), Value: proto.String("success")}},
		Histogram: &dto.Histogram{SampleCount: proto.Uint64(3), Bucket: []*dto.Bucket{b(0.001, 1), b(0.004, 2), b(math.Inf(1), 3)}},
	}}}
	s := Take([]prometheus.Gatherer{prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return []*dto.MetricFamily{fam}, nil })})
	bounds, counts, _ := s.Since(Sample{})
	if !slices.Equal(bounds, []float64{0.001, 0.004}) || !slices.Equal(counts, []uint64{1, 1, 1}) {
		t.Errorf("bounds %v counts %v", bounds, counts)
	}
}
