package kas

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tunnelbench/tunnelbench/core/grpctool/pingack"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tunserver/directory"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing"
)

// TrackerErrorsMetric counts failed tracker operations by op (tunnel_tracker_errors_total{op}).
const TrackerErrorsMetric = directory.TrackerErrorsMetric

// NewMetrics returns a metrics provider for a kas (Config.Metrics): the routing durations are also kept
// as an exponential histogram, tunnel_routing_duration_exponential_seconds, whose few-percent buckets
// show the microseconds that tunnel_routing_duration_seconds's 1 ms first bucket hides.
func NewMetrics(opts ...metrics.Option) (*metrics.Provider, error) {
	return metrics.New(append(opts, metrics.WithExponentialHistograms(routing.RoutingDurationExponentialMetric))...)
}

// PublicPingAcksMetric counts the PING ACKs that the public API held for its next write rather than
// write alone (event "held"), and those of them that still left alone after pingack.Hold (event
// "alone"): a caller's gRPC client probes the bandwidth with a PING on nearly every call's answer.
const PublicPingAcksMetric = "tunnel_public_ping_acks"

func registerPingAcks(m metric.Meter, counts *pingack.Counts) error {
	c, err := m.Int64ObservableCounter(PublicPingAcksMetric, metric.WithDescription("Public API PING ACKs held for the next write (held), and of those, left alone after the hold (alone)"))
	if err != nil {
		return err
	}
	held := metric.WithAttributeSet(attribute.NewSet(attribute.String("event", "held")))
	alone := metric.WithAttributeSet(attribute.NewSet(attribute.String("event", "alone")))
	_, err = m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		obs.ObserveInt64(c, int64(counts.Held.Load()), held)
		obs.ObserveInt64(c, int64(counts.Alone.Load()), alone)
		return nil
	}, c)
	return err
}
