package kas

import (
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
