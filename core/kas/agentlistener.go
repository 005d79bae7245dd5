package kas

import (
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/agentapi"
)

// connectionHandshakeTimeout bounds how long a new connection to a gRPC listener may take to finish
// its TLS and HTTP/2 handshake: a client that connects and sends nothing holds it no longer.
const connectionHandshakeTimeout = 10 * time.Second

// envelopeMax is the largest message on a tunnel or gateway stream: a routed message and its envelope.
func (s *Server) envelopeMax() int { return s.cfg.MaxMessageSize + envelopeOverhead }

// newAgentServer is the agent API's server: agents open tunnels on it with Connect.
func (s *Server) newAgentServer(creds credentials.TransportCredentials, grpcMetrics *grpcprom.ServerMetrics) (*grpc.Server, error) {
	cfg := s.cfg
	opts := []grpc.ServerOption{
		grpctool.RawServerCodec(),
		grpc.MaxRecvMsgSize(s.envelopeMax()),
		grpc.MaxSendMsgSize(s.envelopeMax()),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: AgentMinPingInterval, PermitWithoutStream: true}),
		grpc.KeepaliveParams(agentKeepalive(cfg.MaxConnectionAge, cfg.Limits.IdleConnectionTimeout)),
		grpc.ConnectionTimeout(connectionHandshakeTimeout),
		// Thousands of mostly idle agent connections: no write buffer held per idle connection.
		grpc.SharedWriteBuffer(true),
	}
	opts = append(opts, grpctool.WindowServerOptions()...)
	opts = append(opts, metrics.ServerOptions(grpcMetrics)...)
	srv := grpc.NewServer(withCreds(creds, opts)...)
	api, err := agentapi.New(cfg.Authenticator, s.registry, cfg.MaxConnectionAge, cfg.Log)
	if err != nil {
		return nil, err
	}
	api.SetTunnelRate(cfg.Limits.TunnelRate, cfg.Limits.TunnelBurst)
	api.SetMaxDescriptorBytes(cfg.Limits.MaxDescriptorBytes)
	api.SetHandshakeTimeout(cfg.Limits.TunnelHandshakeTimeout)
	api.SetMaxSendBytes(s.envelopeMax())
	api.SetSingleUse(cfg.SingleUseTunnels)
	api.SetNoBatches(cfg.NoTunnelBatches)
	rpc.RegisterReverseTunnelServer(srv, api)
	return srv, nil
}

// agentKeepalive rotates agent connections: GOAWAY at 20% of the max age (gRPC adds ±10%), then 65% of
// the age for calls in flight to finish. Idle tunnels end earlier, at their own deadline (see
// registry.TunnelDeadline), so rotation never breaks a call.
//
// A connection without any stream for idle is closed: an agent always keeps tunnels open, so only a
// client that never opened one (no token needed for that) is cut off.
func agentKeepalive(maxAge, idle time.Duration) keepalive.ServerParameters {
	kp := keepalive.ServerParameters{Time: agentKeepaliveTime, Timeout: agentKeepaliveTimeout, MaxConnectionIdle: idle}
	if maxAge > 0 {
		kp.MaxConnectionAge = maxAge * 20 / 100
		kp.MaxConnectionAgeGrace = maxAge * 65 / 100
	}
	return kp
}
