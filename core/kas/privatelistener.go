package kas

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"runtime"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/core/tunserver/gateway"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing"
)

// newPrivateServer is the private API's server, where other kas replicas use this kas's tunnels, and
// the pool of connections this kas uses to reach theirs. Both need the shared secret: without it the
// server refuses every call and there is no pool.
func (s *Server) newPrivateServer(creds listenerCreds, grpcMetrics *grpcprom.ServerMetrics) (*grpc.Server, error) {
	h, err := gateway.New(gateway.Config{
		Registry:         s.registry,
		MaxMetadataBytes: s.cfg.Limits.MaxMetadataBytes,
		UnservedGrace:    s.cfg.UnservedGrace,
		Tracer:           s.cfg.Tracer,
		Log:              s.cfg.Log,
		OnTunnelReady:    s.cfg.GatewayTunnelReadyHook,
		NoEager:          s.cfg.NoEagerGateway,
		EagerV1:          s.cfg.EagerGatewayV1,
		NoHopStreams:     s.cfg.NoHopStreams,
	})
	if err != nil {
		return nil, err
	}
	s.gateway = h
	opts := []grpc.ServerOption{
		grpctool.RawServerCodec(),
		grpc.MaxRecvMsgSize(s.envelopeMax()),
		grpc.MaxSendMsgSize(s.envelopeMax()),
		// Every method is served, registered or not.
		grpc.UnknownServiceHandler(h.Handle),
		// Anyone can connect before a token is checked: bounded in time, as on the public API.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: s.cfg.Limits.IdleConnectionTimeout}),
		grpc.ConnectionTimeout(connectionHandshakeTimeout),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
	opts = append(opts, grpctool.WindowServerOptions()...)
	opts = append(opts, metrics.RoutedServerOptions(grpcMetrics)...)
	if len(s.cfg.PrivateAPISecret) == 0 {
		opts = append(opts, grpc.ChainStreamInterceptor(refuseAll))
		return grpc.NewServer(withCreds(creds.server, opts)...), nil
	}
	pauth, err := auth.NewPrivateAuth(s.cfg.PrivateAPISecret)
	if err != nil {
		return nil, err
	}
	opts = append(opts, grpc.ChainStreamInterceptor(pauth.StreamInterceptor()))
	s.gateways = routing.NewGatewayPool(pauth, creds.peer, grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(s.envelopeMax()), grpc.MaxCallSendMsgSize(s.envelopeMax())))
	return grpc.NewServer(withCreds(creds.server, opts)...), nil
}

// refuseAll guards a private API that has no secret: without one no token can be checked.
func refuseAll(any, grpc.ServerStream, *grpc.StreamServerInfo, grpc.StreamHandler) error {
	return status.Error(codes.Unauthenticated, "private API: this kas has no private API secret configured")
}
