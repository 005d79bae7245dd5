package kas

import (
	"context"
	"strings"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tunserver/directory"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/agentapi"
	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
)

// Limits bound what one agent or caller can make kas hold or do. Zero fields take DefaultLimits's.
type Limits struct {
	// MaxTunnelsPerAgent bounds one agent's tunnels on this kas, those still in their handshake included.
	MaxTunnelsPerAgent int
	MaxWaitingPerAgent int
	// MaxWaiting bounds the calls waiting for a tunnel on this kas, for any agent.
	MaxWaiting int
	// MaxWaitingPerCaller bounds the calls of one caller token waiting for a tunnel.
	MaxWaitingPerCaller int
	// MaxMetadataBytes bounds a routed call's request metadata (HTTP/2 header list size).
	MaxMetadataBytes int
	// TunnelHandshakeTimeout bounds how long a new tunnel may take to send its descriptor.
	TunnelHandshakeTimeout time.Duration
	// MaxConnections bounds the open connections of the HTTP and metrics listeners each; more wait in
	// the kernel's accept queue until one closes. The gRPC listeners bound connections in time.
	MaxConnections int
	// IdleConnectionTimeout closes a connection that carried no call or tunnel for this long (public,
	// private and agent API, HTTP), so that connections nobody uses do not stay.
	IdleConnectionTimeout time.Duration
	// TunnelRate is the new tunnels per second one agent may open, on average (TunnelBurst at once). A
	// reusable tunnel carries many calls; a single-use agent opens one per call, so for it the rate
	// bounds calls per second too.
	TunnelRate  float64
	TunnelBurst int
	// MaxDescriptorBytes bounds the descriptor an agent sends first on every tunnel.
	MaxDescriptorBytes int
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
	MaxTunnelsPerAgent:     1000,
	MaxWaitingPerAgent:     1000,
	MaxWaiting:             10000,
	MaxWaitingPerCaller:    1000,
	MaxMetadataBytes:       call.DefaultMaxMetadataBytes,
	TunnelHandshakeTimeout: agentapi.DefaultHandshakeTimeout,
	// Above the 10 000 agents of the scale benchmark, each on its own connection.
	MaxConnections:        20000,
	IdleConnectionTimeout: 5 * time.Minute,
	TunnelRate:            20000,
	TunnelBurst:           20000,
	MaxDescriptorBytes:    registry.DefaultMaxDescriptorBytes,
	MaxHTTPBody:           1 << 30,
	MaxHTTPHeaderBytes:    1 << 20,
	// Matches httptunnel's default; a header arrives in one round trip in practice.
	HTTPReadHeaderTimeout: 10 * time.Second,
}

// TrackerErrorsMetric counts failed tracker operations by op (tunnel_tracker_errors_total{op}).
const TrackerErrorsMetric = directory.TrackerErrorsMetric

// LimitRejectionsMetric counts requests refused because a limit bit (tunnel_limit_rejections_total{limit}).
const LimitRejectionsMetric = "tunnel_limit_rejections"

func (s *Server) limitHit(limit string) {
	s.limitHits.Add(context.Background(), 1, metric.WithAttributes(attribute.String("limit", limit)))
}

// limitNames are every limit the rejections metric counts, reported at zero from the start so that
// dashboards and alerts see the series before the first rejection.
var limitNames = []string{
	tunserver.LimitTunnelsPerAgent, tunserver.LimitWaitingPerAgent, tunserver.LimitTunnelRate,
	tunserver.LimitMessageSize, tunserver.LimitDescriptorSize, limitHTTPBody, limitHTTPHeader,
	tunserver.LimitWaiting, tunserver.LimitWaitingByCaller, tunserver.LimitMetadataSize,
}

const (
	limitHTTPBody   = "http_body"
	limitHTTPHeader = "http_header"
)

// messageSizeInterceptor bounds routed messages with a status that names the flag, and counts every
// message refused for its size. gRPC checks received messages itself (and answers the caller at once with
// its own "larger than max" status), so those are only counted; sent messages are checked here first, so
// that the caller learns which limit it was.
func messageSizeInterceptor(limit int, onLimit func(string)) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &sizeCheckedStream{ServerStream: ss, limit: limit, onLimit: onLimit})
	}
}

type sizeCheckedStream struct {
	grpc.ServerStream
	limit   int
	onLimit func(string)
}

func (s *sizeCheckedStream) SendMsg(m any) error {
	if f, ok := m.(*grpctool.RawFrame); ok && len(f.Data) > s.limit {
		s.onLimit(tunserver.LimitMessageSize)
		return status.Errorf(codes.ResourceExhausted, "the agent's response message is %d bytes, larger than the limit (--max-message-size) of %d bytes", len(f.Data), s.limit)
	}
	return s.ServerStream.SendMsg(m)
}

func (s *sizeCheckedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err != nil && status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max") {
		s.onLimit(tunserver.LimitMessageSize)
	}
	return err
}
