package tunnels

import (
	"context"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/bench/grpcproxy"
	"github.com/tunnelbench/tunnelbench/bench/topology"
)

// GRPCProxy is no tunnel either: direct's servers, each behind a bare gRPC proxy of its own
// (bench/grpcproxy) on loopback. Its calls make the same two gRPC hops as this project's tunnel-public
// path (caller → kas → agent) with nothing of a tunnel: what those two hops cost by themselves.
const GRPCProxy = "grpc-proxy"

func init() {
	Register(Registration{Name: GRPCProxy, Kind: KindReference,
		About:   "no tunnel: direct gRPC behind a bare gRPC proxy, the two hops of tunnel-public without a tunnel",
		Adapter: StartFunc(startGRPCProxy)})
}

type grpcProxy struct {
	cfg      Config
	backends Tunnel // direct: agent id's server, reached through cfg.AgentDial like direct's
	proxies  loopbackServers
}

func startGRPCProxy(ctx context.Context, cfg Config) (Tunnel, error) {
	b, err := startDirect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &grpcProxy{cfg: cfg, backends: b}, nil
}

// registrarFunc is a grpc.ServiceRegistrar made of its RegisterService.
type registrarFunc func(sd *grpc.ServiceDesc, impl any)

func (f registrarFunc) RegisterService(sd *grpc.ServiceDesc, impl any) { f(sd, impl) }

func (p *grpcProxy) ConnectAgents(ctx context.Context) error {
	if err := p.backends.ConnectAgents(ctx); err != nil {
		return err
	}
	for id := int64(1); id <= int64(p.cfg.Agents); id++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		backend, err := p.backends.Conn(id)
		if err != nil {
			return err
		}
		s := grpc.NewServer(append(grpcproxy.ServerOptions(), grpc.MaxRecvMsgSize(p.cfg.MaxMessageSize), grpc.MaxSendMsgSize(p.cfg.MaxMessageSize))...)
		// The proxy serves the methods agent id's server serves, each forwarded to it.
		p.cfg.RegisterServices(id, registrarFunc(func(sd *grpc.ServiceDesc, _ any) { grpcproxy.Register(s, sd, backend) }))
		if err := p.proxies.serve(s); err != nil {
			return err
		}
	}
	return nil
}

func (p *grpcProxy) Conn(id int64) (grpc.ClientConnInterface, error) {
	if err := p.cfg.CheckAgent(id); err != nil {
		return nil, err
	}
	return p.proxies.conn(id, func(route topology.Route) (*grpc.ClientConn, error) {
		return topology.Dial(route, topology.MaxMessageSize(p.cfg.MaxMessageSize))
	})
}

func (p *grpcProxy) Close(ctx context.Context) error {
	p.proxies.close(ctx)
	return p.backends.Close(ctx)
}
