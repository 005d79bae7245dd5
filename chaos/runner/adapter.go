package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
	"github.com/tunnelbench/tunnelbench/chaos"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
)

// Bounds of a run through an adapter.
const (
	// adapterCheckTimeout bounds the call that checks each agent answers before the load starts.
	adapterCheckTimeout = 30 * time.Second
	// adapterCloseTimeout bounds the adapter's Close; a Close that ignores it is waited for
	// adapterCloseSlack more, then left behind and reported.
	adapterCloseTimeout = 30 * time.Second
	adapterCloseSlack   = 5 * time.Second
)

// adapterBed is another tunnel as a testbed (scenario run --tunnel): its bench/tunnels adapter's server
// and the scenario's agents, every agent's link to the server through a proxy of its own on the
// agent->kas link (named as the topology's, agent-N/kas-0, so that selections read the same), and the
// load from callers in the server's process through the adapter's connections. There is one entry,
// no kas to sample, and no process to act on: Scenario.CheckTunnel keeps out the faults that need them.
type adapterBed struct {
	tunnel  string
	agents  []int64
	proxies *chaos.Proxies
	run     *tunnels.Running
	conns   agentConns
	accepts acceptLog

	// mu serializes adding each agent's proxy on its first connection.
	mu sync.Mutex
}

var _ testbed = (*adapterBed)(nil)

// startAdapter starts the adapter registered as tunnel with the scenario's agents, and returns once
// every agent answered a call through its link's proxy.
func startAdapter(ctx context.Context, sc *scenario.Scenario, tunnel string) (_ *adapterBed, err error) {
	b := &adapterBed{tunnel: tunnel, agents: sc.Topology.AgentIDs(), proxies: chaos.NewProxies(), conns: agentConns{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.close())
		}
	}()
	b.run, err = tunnels.Start(ctx, tunnel, tunnels.Config{Agents: sc.Topology.Agents, AgentDial: b.dial})
	if err != nil {
		return nil, err
	}
	for _, id := range b.agents {
		if b.conns[id], err = b.run.Conn(id); err != nil {
			return nil, fmt.Errorf("tunnel %s: agent %d: %w", tunnel, id, err)
		}
	}
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// check calls every agent once, and fails unless each one's link went through its proxy: faults on
// the link of an agent whose adapter ignores Config.AgentDial would not reach it.
func (b *adapterBed) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, adapterCheckTimeout)
	defer cancel()
	for _, id := range b.agents {
		c := demo.NewDemoClient(b.conns[id])
		if _, err := c.Echo(ctx, &demo.EchoRequest{Message: "check"}); err != nil {
			return fmt.Errorf("tunnel %s: agent %d does not answer: %w", b.tunnel, id, err)
		}
		if b.proxies.Get(chaos.LinkAgentKas, agentLinkName(id)) == nil {
			return fmt.Errorf("tunnel %s: agent %d does not connect through tunnels.Config.AgentDial, so faults on its link would not reach it", b.tunnel, id)
		}
	}
	return nil
}

func agentLinkName(id int64) string { return chaos.AgentName(id) + "/" + chaos.KasName(0) }

// dial is Config.AgentDial: agent id reaches addr through its link's proxy, added on its first
// connection (the adapter's server only says where it listens then).
func (b *adapterBed) dial(ctx context.Context, id int64, addr string) (net.Conn, error) {
	via, err := b.proxy(id, addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", via)
	if err == nil {
		b.accepts.add(time.Now())
	}
	return c, err
}

func (b *adapterBed) proxy(id int64, addr string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	name := agentLinkName(id)
	if p := b.proxies.Get(chaos.LinkAgentKas, name); p != nil {
		if p.Upstream() != addr {
			return "", fmt.Errorf("agent %d dials %s, but its link leads to %s", id, addr, p.Upstream())
		}
		return p.Listen(), nil
	}
	return b.proxies.Add(chaos.LinkAgentKas, name, addr)
}

// linkProxies picks a count or fraction of agents as the scenario does (the first ids), whatever
// order the agents first connected in and so their proxies were added.
func (b *adapterBed) linkProxies(link chaos.Link, sel chaos.Select) ([]*chaos.Proxy, error) {
	if link == chaos.LinkAgentKas && (sel.Count > 0 || sel.Fraction > 0) {
		ids, err := sel.PickAgents(b.agents)
		if err != nil {
			return nil, err
		}
		sel = chaos.Select{Agents: ids}
	}
	return b.proxies.Select(link, sel)
}

func (b *adapterBed) stats() registry.Stats            { return registry.Stats{} }
func (b *adapterBed) gatherers() []prometheus.Gatherer { return nil }
func (b *adapterBed) acceptTimes() []time.Time         { return b.accepts.snapshot() }
func (b *adapterBed) aliveKas() []int                  { return []int{0} }

func (b *adapterBed) newCalls(shape load.Shape, payload int) []load.NewCall {
	return []load.NewCall{load.NewShapeCall(shape, payload, b.conns, func(ctx context.Context) context.Context { return ctx })}
}

// close closes the adapter within adapterCloseTimeout, then the proxies.
func (b *adapterBed) close() error {
	var err error
	if b.run != nil {
		ctx, cancel := context.WithTimeout(context.Background(), adapterCloseTimeout)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- b.run.Close(ctx) }()
		select {
		case err = <-done:
		case <-time.After(adapterCloseTimeout + adapterCloseSlack):
			err = fmt.Errorf("did not close within %s", adapterCloseTimeout+adapterCloseSlack)
		}
		if err != nil {
			err = fmt.Errorf("tunnel %s: close: %w", b.tunnel, err)
		}
		b.run = nil
	}
	b.proxies.Close()
	return err
}

// The adapter's tunnel has no process a fault can act on; CheckTunnel keeps such faults out.

func (b *adapterBed) KasCount() int   { return 1 }
func (b *adapterBed) Agents() []int64 { return b.agents }

func (b *adapterBed) KillKas(context.Context, int) error { return b.projectOnly("kill-kas") }
func (b *adapterBed) StopKas(context.Context, int) error { return b.projectOnly("stop-kas") }
func (b *adapterBed) KillAgents(context.Context, []int64) error {
	return b.projectOnly("kill-agents")
}
func (b *adapterBed) StartAgents(context.Context, []int64) error {
	return b.projectOnly("start-agents")
}
func (b *adapterBed) RestartAgents(context.Context, []int64) error {
	return b.projectOnly("restart-agents")
}
func (b *adapterBed) StopRedis(context.Context) error  { return b.projectOnly("stop-redis") }
func (b *adapterBed) StartRedis(context.Context) error { return b.projectOnly("start-redis") }

func (b *adapterBed) projectOnly(fault string) error {
	return fmt.Errorf("%s applies to this project's tunnel only, not to %s", fault, b.tunnel)
}

// agentConns sends each call to the connection of the agent its context names (agentKey).
type agentConns map[int64]grpc.ClientConnInterface

func (c agentConns) conn(ctx context.Context) (grpc.ClientConnInterface, error) {
	id, _ := ctx.Value(agentKey{}).(int64)
	cc, ok := c[id]
	if !ok {
		return nil, status.Errorf(codes.Internal, "runner: no connection to agent %d", id)
	}
	return cc, nil
}

func (c agentConns) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	cc, err := c.conn(ctx)
	if err != nil {
		return err
	}
	return cc.Invoke(ctx, method, args, reply, opts...)
}

func (c agentConns) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cc, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	return cc.NewStream(ctx, desc, method, opts...)
}
