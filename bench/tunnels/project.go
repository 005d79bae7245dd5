package tunnels

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
)

// This project's tunnel in its two modes: kas and agentk in this process over loopback TCP, started by
// bench/topology as bench's own topologies are; the caller sits inside kas (its internal API), as on
// bench's tunnel path.
const (
	// Reuse is this project's tunnel as it ships: each tunnel carries call after call.
	Reuse = "tunnel"
	// SingleUse is the protocol's first version: a tunnel per call.
	SingleUse = "tunnel-single-use"
)

// tunnelsPerAgent is how many idle tunnels each agent keeps: the agent's default pool.
func (p *project) tunnelsPerAgent() int {
	if p.singleUse {
		return tunclient.DefaultMinIdleSingleUse
	}
	return tunclient.DefaultMinIdle
}

func init() {
	Register(Registration{Name: Reuse, Kind: KindProject, About: "this project's tunnel, reusable tunnels (kas internal API)",
		Adapter: StartFunc(func(ctx context.Context, cfg Config) (Tunnel, error) { return startProject(cfg, false) })})
	Register(Registration{Name: SingleUse, Kind: KindProject, About: "this project's tunnel, single-use tunnels (kas internal API)",
		Adapter: StartFunc(func(ctx context.Context, cfg Config) (Tunnel, error) { return startProject(cfg, true) })})
}

type project struct {
	cfg       Config
	singleUse bool
	kas       *topology.Kas
	agents    topology.Agents
}

func startProject(cfg Config, singleUse bool) (Tunnel, error) {
	auth, err := topology.AgentTokens(cfg.Agents, nil)
	if err != nil {
		return nil, err
	}
	k, err := topology.StartKas(topology.KasConfig{Auth: auth, AgentOnly: true, MaxMessageSize: cfg.MaxMessageSize})
	if err != nil {
		return nil, err
	}
	return &project{cfg: cfg, singleUse: singleUse, kas: k}, nil
}

func (p *project) ConnectAgents(ctx context.Context) error {
	var err error
	p.agents, err = topology.StartAgents(ctx, p.cfg.Agents, func(id int64) (topology.AgentConfig, error) {
		route, err := p.kas.AgentRoute(id)
		ac := topology.AgentConfig{ID: id, Route: p.cfg.agentRoute(id, route), MinIdle: p.tunnelsPerAgent(), MaxMessageSize: p.cfg.MaxMessageSize,
			Register: func(a *tunclient.Agent) error {
				p.cfg.RegisterServices(id, a)
				return nil
			}}
		if p.singleUse {
			ac.Adjust = func(c *tunclient.Config) { c.SingleUse = true }
		}
		return ac, err
	})
	if err != nil {
		return err
	}
	timeout := DefaultConnectTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	want := int64(p.cfg.Agents * p.tunnelsPerAgent())
	return topology.WaitIdle(ctx, timeout, want, func() int64 { return p.kas.Server.Registry().Stats().IdleTunnels })
}

func (p *project) Conn(id int64) (grpc.ClientConnInterface, error) {
	if err := p.cfg.CheckAgent(id); err != nil {
		return nil, err
	}
	md := metadata.Pairs(rpc.RoutingAgentIDMetadataKey, strconv.FormatInt(id, 10))
	return routedConn{cc: p.kas.Server.InternalConn(), md: md}, nil
}

func (p *project) Close(ctx context.Context) error {
	p.agents.Stop(ctx)
	p.kas.Shutdown(ctx)
	return nil
}

// routedConn adds kas's routing metadata (which agent) to every call, as bench's tunnel cases do.
type routedConn struct {
	cc grpc.ClientConnInterface
	md metadata.MD
}

func (c routedConn) ctx(ctx context.Context) context.Context {
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		return metadata.NewOutgoingContext(ctx, metadata.Join(md, c.md))
	}
	return metadata.NewOutgoingContext(ctx, c.md)
}

func (c routedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.cc.Invoke(c.ctx(ctx), method, args, reply, opts...)
}

func (c routedConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.cc.NewStream(c.ctx(ctx), desc, method, opts...)
}
