package limits

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tunnelbench/tunnelbench/core/tunserver"
)

// RejectionsMetric counts requests refused because a limit bit (tunnel_limit_rejections_total{limit}).
const RejectionsMetric = "tunnel_limit_rejections"

// Limit names of the HTTP guard, beside the tunnel core's (tunserver.Limit*).
const (
	HTTPBody   = "http_body"
	HTTPHeader = "http_header"
)

// names are every limit the rejections metric counts, reported at zero from the start so that
// dashboards and alerts see the series before the first rejection.
var names = []string{
	tunserver.LimitTunnelsPerAgent, tunserver.LimitWaitingPerAgent, tunserver.LimitTunnelRate,
	tunserver.LimitMessageSize, tunserver.LimitDescriptorSize, HTTPBody, HTTPHeader,
	tunserver.LimitWaiting, tunserver.LimitWaitingByCaller, tunserver.LimitMetadataSize,
}

// Rejections counts refusals by limit, for every part of kas that enforces one (see Hit).
type Rejections struct {
	counter metric.Int64Counter
}

// NewRejections makes the RejectionsMetric counter on meter, every limit's series at zero.
func NewRejections(meter metric.Meter) (*Rejections, error) {
	c, err := meter.Int64Counter(RejectionsMetric, metric.WithDescription("Requests refused because a limit bit, by limit"))
	if err != nil {
		return nil, err
	}
	for _, l := range names {
		c.Add(context.Background(), 0, metric.WithAttributes(attribute.String("limit", l)))
	}
	return &Rejections{counter: c}, nil
}

// Hit counts one refusal because limit bit. It returns at once, so it may be called under a lock.
func (r *Rejections) Hit(limit string) {
	r.counter.Add(context.Background(), 1, metric.WithAttributes(attribute.String("limit", limit)))
}
