package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric"
)

// TestExponentialHistogram: a named instrument is served as a native histogram, fine enough (scale 4
// or more) over the widest range its limits promise; other histograms keep their explicit buckets.
func TestExponentialHistogram(t *testing.T) {
	p, err := New(WithExponentialHistograms("fine"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	m := p.Meter("test")
	fine, err := m.Float64Histogram("fine", metric.WithUnit("s"))
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := m.Float64Histogram("coarse", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.001, 1))
	if err != nil {
		t.Fatal(err)
	}
	// 2^-20 s (about 1 µs) to 2^11 s (34 min): a range of 2^31.
	for _, v := range []float64{1.0 / (1 << 20), 37e-6, 2.5e-3, 2048} {
		fine.Record(context.Background(), v)
		coarse.Record(context.Background(), v)
	}
	fams, err := p.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range fams {
		h := f.GetMetric()[0].GetHistogram()
		switch f.GetName() {
		case "fine_seconds":
			found++
			if h.Schema == nil || h.GetSchema() < 4 || h.GetSampleCount() != 4 || len(h.GetBucket()) != 0 {
				t.Errorf("fine_seconds: schema %v (want >= 4), %d samples, %d classic buckets", h.Schema, h.GetSampleCount(), len(h.GetBucket()))
			}
		case "coarse_seconds":
			found++
			if h.Schema != nil || len(h.GetBucket()) != 2 {
				t.Errorf("coarse_seconds: schema %v, %d buckets, want explicit buckets", h.Schema, len(h.GetBucket()))
			}
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the two histograms", found)
	}
	// Text exposition (what a Prometheus without native histograms reads) still has its count and sum.
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"fine_seconds_count 4", "fine_seconds_sum"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("text exposition lacks %q:\n%s", want, body)
		}
	}
}
