package kas

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/tunserver"
)

// Limits bound what one agent or caller can make kas hold or do. Zero fields take DefaultLimits's.
type Limits struct {
	MaxTunnelsPerAgent int
	MaxWaitingPerAgent int
	// TunnelRate is the new tunnels per second one agent may open, on average (TunnelBurst at once).
	// Each call uses a tunnel, so it also bounds an agent's calls per second.
	TunnelRate  float64
	TunnelBurst int
	// MaxHTTPBody bounds an HTTP request body sent through the tunnel (413 above it).
	MaxHTTPBody int64
	// MaxHTTPHeaderBytes bounds an HTTP request's line and header (431 above it).
	MaxHTTPHeaderBytes int
	// HTTPReadHeaderTimeout bounds how long an HTTP client may take to send a request header, so that
	// slow clients (slowloris) cannot hold connections open.
	HTTPReadHeaderTimeout time.Duration
}

// DefaultLimits are generous for real use and still bounded.
var DefaultLimits = Limits{
	MaxTunnelsPerAgent: 1000,
	MaxWaitingPerAgent: 1000,
	TunnelRate:         20000,
	TunnelBurst:        20000,
	MaxHTTPBody:        1 << 30,
	MaxHTTPHeaderBytes: 1 << 20,
	// Matches httptunnel's default; a header arrives in one round trip in practice.
	HTTPReadHeaderTimeout: 10 * time.Second,
}

// LimitRejectionsMetric counts requests refused because a limit bit (tunnel_limit_rejections_total{limit}).
const LimitRejectionsMetric = "tunnel_limit_rejections"

func (s *Server) limitHit(limit string) {
	s.limitHits.Add(context.Background(), 1, metric.WithAttributes(attribute.String("limit", limit)))
}

// limitNames are every limit the rejections metric counts, reported at zero from the start so that
// dashboards and alerts see the series before the first rejection.
var limitNames = []string{
	tunserver.LimitTunnelsPerAgent, tunserver.LimitWaitingPerAgent, tunserver.LimitTunnelRate,
	tunserver.LimitMessageSize, limitHTTPBody, limitHTTPHeader,
}

const (
	limitHTTPBody   = "http_body"
	limitHTTPHeader = "http_header"
)

// messageSizeInterceptor names the flag in gRPC's "message larger than max" errors on routed calls, and
// counts them, so that a caller who hits the limit knows which knob it is.
func messageSizeInterceptor(limit int, onLimit func(string)) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		if err == nil || status.Code(err) != codes.ResourceExhausted {
			return err
		}
		msg := status.Convert(err).Message()
		if !strings.Contains(msg, "larger than max") {
			return err
		}
		onLimit(tunserver.LimitMessageSize)
		return status.Errorf(codes.ResourceExhausted, "message larger than the limit (--max-message-size) of %d bytes: %s", limit, msg)
	}
}
