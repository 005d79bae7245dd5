package metrics

import (
	"fmt"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
)

// RoutedMethod is the method name under which calls routed to agents are counted: callers choose those
// method names, so counting them by name would let anyone grow the metrics without bound.
const RoutedMethod = "/tunnelbench.routed/Call"

// GRPCServer is the standard gRPC server metrics (grpc_server_started_total, grpc_server_handled_total
// by code, grpc_server_msg_{received,sent}_total) registered on p.
func GRPCServer(p *Provider) (*grpcprom.ServerMetrics, error) {
	m := grpcprom.NewServerMetrics()
	if err := p.registry.Register(m); err != nil {
		return nil, fmt.Errorf("register gRPC server metrics: %w", err)
	}
	return m, nil
}

// GRPCClient is the standard gRPC client metrics (grpc_client_started_total, grpc_client_handled_total
// by code, ...) registered on p.
func GRPCClient(p *Provider) (*grpcprom.ClientMetrics, error) {
	m := grpcprom.NewClientMetrics()
	if err := p.registry.Register(m); err != nil {
		return nil, fmt.Errorf("register gRPC client metrics: %w", err)
	}
	return m, nil
}

// ServerOptions instruments a server whose methods are known and bounded.
func ServerOptions(m *grpcprom.ServerMetrics) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(m.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(m.StreamServerInterceptor()),
	}
}

// RoutedServerOptions instruments a server that routes any method: every call is counted under
// RoutedMethod, by code.
func RoutedServerOptions(m *grpcprom.ServerMetrics) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainStreamInterceptor(RoutedStreamInterceptor(m))}
}

// RoutedStreamInterceptor counts every call under RoutedMethod, by code.
func RoutedStreamInterceptor(m *grpcprom.ServerMetrics) grpc.StreamServerInterceptor {
	inner := m.StreamServerInterceptor()
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		routed := *info
		routed.FullMethod = RoutedMethod
		return inner(srv, ss, &routed, handler)
	}
}
