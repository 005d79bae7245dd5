package bench

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tunnelbench/tunnelbench/bench/routingstats"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing"
)

// TestRoutingFiguresFromExponential: known routing durations recorded on a kas's metrics provider
// (kas.NewMetrics) come out of a case's Routing within 5%, read in process and scraped over HTTP as a
// process kas is (the protobuf format carries the native histogram); the report names the source.
func TestRoutingFiguresFromExponential(t *testing.T) {
	mp, err := kas.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Shutdown(context.Background())
	m := mp.Meter("test")
	seed, err := m.Float64Histogram(routing.RoutingDurationMetric, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(routing.RoutingDurationBuckets...))
	if err != nil {
		t.Fatal(err)
	}
	exp, err := m.Float64Histogram(routing.RoutingDurationExponentialMetric, metric.WithUnit("s"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mp.Handler())
	defer srv.Close()
	for _, g := range []struct {
		name string
		g    prometheus.Gatherer
	}{
		{"in process", mp.Registry()},
		{"scraped", scrapeGatherer{url: srv.URL, client: &http.Client{Timeout: 5 * time.Second}}},
	} {
		t.Run(g.name, func(t *testing.T) {
			gs := []prometheus.Gatherer{g.g}
			var acc *routingAcc
			for _, d := range []time.Duration{37 * time.Microsecond, 120 * time.Microsecond, 2500 * time.Microsecond} {
				before := snapshotRouting(gs)
				// Per round: 95 routings of d, then 5 of 4d, so p50 is d and p99 4d.
				for i := range 100 {
					v := d
					if i >= 95 {
						v = 4 * d
					}
					for _, h := range []metric.Float64Histogram{seed, exp} {
						h.Record(context.Background(), v.Seconds(), metric.WithAttributes(attribute.String("status", "success")))
					}
				}
				acc = addRouting(acc, before, snapshotRouting(gs))
				one := addRouting(nil, before, snapshotRouting(gs)).finish()
				if math.Abs(one.P50us-float64(d.Microseconds())) > 0.05*float64(d.Microseconds()) ||
					math.Abs(one.P99us-4*float64(d.Microseconds())) > 0.05*4*float64(d.Microseconds()) {
					t.Errorf("%v: p50 %.1f µs, p99 %.1f µs, want %v and %v within 5%%", d, one.P50us, one.P99us, d, 4*d)
				}
				if one.Source != routingstats.ExponentialMetric || one.ResolutionPct <= 0 || one.ResolutionPct > 5 {
					t.Errorf("%v: source %q, resolution %v%%", d, one.Source, one.ResolutionPct)
				}
				if len(one.BucketCounts) != len(routing.RoutingDurationBuckets)+1 {
					t.Errorf("%v: the seed's buckets are not kept for the plots: %v", d, one.BucketCounts)
				}
			}
			// Over the three rounds: 285 routings at 37, 120 or 2500 µs, 15 at four times that.
			r := acc.finish()
			if math.Abs(r.P50us-120) > 6 {
				t.Errorf("three rounds: p50 %.1f µs, want 120 within 5%%", r.P50us)
			}
			var b strings.Builder
			writeRoutingNote(&b, &Summary{Cases: []CaseResult{{Routing: r}}})
			if !strings.Contains(b.String(), "`"+routingstats.ExponentialMetric+"`") {
				t.Errorf("report note does not name the exponential histogram: %q", b.String())
			}
		})
	}
}

// TestRoutingNoteBuckets: a case whose routing came from the seed's buckets is said to, and a summary
// from before Routing.Source gets no note.
func TestRoutingNoteBuckets(t *testing.T) {
	var b strings.Builder
	writeRoutingNote(&b, &Summary{Cases: []CaseResult{{Routing: &Routing{Source: routingstats.DurationMetric}}, {}}})
	if !strings.Contains(b.String(), "The routing percentiles of one case come from `tunnel_routing_duration_seconds`'s buckets") {
		t.Errorf("note %q", b.String())
	}
	b.Reset()
	writeRoutingNote(&b, testSummary(t))
	if b.Len() != 0 {
		t.Errorf("a summary without routing sources got a note: %q", b.String())
	}
}
