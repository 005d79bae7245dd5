package routing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Metric names. In Prometheus they appear as tunnel_routing_duration_seconds_{bucket,sum,count},
// tunnel_routing_duration_exponential_seconds (a native histogram) and tunnel_routing_timeout_total.
const (
	RoutingDurationMetric = "tunnel_routing_duration"
	RoutingTimeoutMetric  = "tunnel_routing_timeout"
	// RoutingEagerMetric counts eager gateway streams (tunnel_routing_eager_total) by result: "taken"
	// (the remembered gateway had an idle tunnel: no find, no round trip) or "missed" (it had none and
	// the call was searched for as usual).
	RoutingEagerMetric = "tunnel_routing_eager"
	// RoutingDurationExponentialMetric records the same durations as RoutingDurationMetric, whose
	// buckets (a contract) start at 1 ms, for a provider that aggregates it as an exponential histogram
	// (metrics.WithExponentialHistograms; kas.NewMetrics does): routings take microseconds.
	RoutingDurationExponentialMetric = "tunnel_routing_duration_exponential"
)

// RoutingDurationBuckets are the histogram's bucket bounds in seconds: ×4 from 1 ms to 16.384 s.
var RoutingDurationBuckets = []float64{0.001, 0.004, 0.016, 0.064, 0.256, 1.024, 4.096, 16.384}

var (
	routingStatusSuccess = metric.WithAttributeSet(attribute.NewSet(attribute.String("status", "success")))
	routingStatusAborted = metric.WithAttributeSet(attribute.NewSet(attribute.String("status", "aborted")))
	eagerTaken           = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "taken")))
	eagerMissed          = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "missed")))
)

// routingMetrics are recorded on the routing kas.
type routingMetrics struct {
	duration, durationExp metric.Float64Histogram
	timeouts, eager       metric.Int64Counter
}

func newRoutingMetrics(m metric.Meter) (*routingMetrics, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	d, err := m.Float64Histogram(RoutingDurationMetric,
		metric.WithUnit("s"),
		metric.WithDescription("The time it takes the routing kas to find a suitable tunnel"),
		metric.WithExplicitBucketBoundaries(RoutingDurationBuckets...),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", RoutingDurationMetric, err)
	}
	e, err := m.Float64Histogram(RoutingDurationExponentialMetric,
		metric.WithUnit("s"),
		metric.WithDescription("The time it takes the routing kas to find a suitable tunnel, at a resolution of a few percent"),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", RoutingDurationExponentialMetric, err)
	}
	c, err := m.Int64Counter(RoutingTimeoutMetric,
		metric.WithDescription("The total number of times routing timed out i.e. didn't find a suitable agent connection within allocated time"),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", RoutingTimeoutMetric, err)
	}
	eg, err := m.Int64Counter(RoutingEagerMetric,
		metric.WithDescription("Calls sent to the gateway kas where the agent was last found without a find, by result: taken, or missed (searched for as usual)"),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", RoutingEagerMetric, err)
	}
	// Present from the start, so that dashboards and alerts see 0 rather than no data.
	c.Add(context.Background(), 0)
	return &routingMetrics{duration: d, durationExp: e, timeouts: c, eager: eg}, nil
}

func (m *routingMetrics) eagerResult(taken bool) {
	if taken {
		m.eager.Add(context.Background(), 1, eagerTaken)
	} else {
		m.eager.Add(context.Background(), 1, eagerMissed)
	}
}

func (m *routingMetrics) found(start time.Time) {
	m.record(time.Since(start).Seconds(), routingStatusSuccess)
}

func (m *routingMetrics) aborted(start time.Time, timedOut bool) {
	m.record(time.Since(start).Seconds(), routingStatusAborted)
	if timedOut {
		m.timeouts.Add(context.Background(), 1)
	}
}

func (m *routingMetrics) record(seconds float64, status metric.RecordOption) {
	m.duration.Record(context.Background(), seconds, status)
	m.durationExp.Record(context.Background(), seconds, status)
}
