package kas

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"runtime"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/grpctool/pingack"
	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/core/tunserver/refusal"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing"
)

// PublicStreamWindow is the flow-control window of each call on the public API: the request bytes a
// caller can send before kas reads them (a call waiting for a tunnel is not read). One 1 MiB message fits.
const PublicStreamWindow = 1 << 20

// newAPIServer is the public API's server, where callers route calls to agents, and the in-process
// connection for callers in kas's own process (the HTTP listener, an embedding harness). Both pass
// through the same interceptors, metrics and message size limit, the public API adds caller
// authentication: an in-process caller is measured doing what a public one does.
func (s *Server) newAPIServer(router *routing.Router, creds credentials.TransportCredentials, grpcMetrics *grpcprom.ServerMetrics) (*grpc.Server, *grpctool.InProcessConn) {
	limit := s.cfg.MaxMessageSize
	shared := []grpc.StreamServerInterceptor{
		metrics.RoutedStreamInterceptor(grpcMetrics),
		limits.MessageSizeInterceptor(limit, s.rejections.Hit),
	}
	public := shared
	if s.cfg.Callers != nil {
		public = append(public, auth.CallerAuthInterceptor(s.cfg.Callers, refusal.New(s.cfg.Log.With("listener", "public API"), 0)))
	}
	opts := []grpc.ServerOption{
		grpctool.RawServerCodec(),
		grpc.MaxRecvMsgSize(limit),
		grpc.MaxSendMsgSize(limit),
		// Every method is routable: the Router is the server's unknown service handler.
		grpc.UnknownServiceHandler(router.RouteStream),
		// A caller's connection that carries nothing goes away after --idle-connection-timeout.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: s.cfg.Limits.IdleConnectionTimeout}),
		grpc.ConnectionTimeout(connectionHandshakeTimeout),
		grpc.ChainStreamInterceptor(public...),
		// Fixed windows turn off gRPC's bandwidth-delay probing, a PING and its ACK for nearly every
		// call's data (two of the seven writes of a small call through kas), and bound what one waiting
		// call can make kas buffer to PublicStreamWindow, where probing could grow it to 16 MiB.
		grpc.StaticStreamWindowSize(PublicStreamWindow),
		grpc.StaticConnWindowSize(grpctool.ConnectionWindow),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}
	if creds != nil {
		// A lone PING ACK waits for the call's answer (see Start, which does the same for plaintext).
		creds = pingack.Credentials(creds, &s.pingAcks)
	}
	internal := grpctool.NewInProcessConn(grpctool.ChainStreamHandler(router.RouteStream, shared...))
	return grpc.NewServer(withCreds(creds, opts)...), internal
}
