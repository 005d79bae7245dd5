package tunnels

import (
	"context"
	"net"

	"github.com/tunnelbench/tunnelbench/bench/topology"
)

// agentDialer is how agent id connects to the server side at an address: through Config.AgentDial, or
// over TCP.
func (c Config) agentDialer(id int64) func(ctx context.Context, addr string) (net.Conn, error) {
	if c.AgentDial != nil {
		return func(ctx context.Context, addr string) (net.Conn, error) { return c.AgentDial(ctx, id, addr) }
	}
	var d net.Dialer
	return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
}

// agentRoute is how agent id reaches r, a TCP listener's route: r itself, or through Config.AgentDial
// when set. gRPC's passthrough resolver hands the dialer r's address as it is.
func (c Config) agentRoute(id int64, r topology.Route) topology.Route {
	if c.AgentDial == nil {
		return r
	}
	dial := c.agentDialer(id)
	target := r.Target
	return topology.Route{Target: "passthrough:///" + target, Dial: func(ctx context.Context, _ string) (net.Conn, error) {
		return dial(ctx, target)
	}}
}
