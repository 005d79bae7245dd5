package tunnels

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/core/demo"
)

// Config defaults.
const (
	// DefaultMaxMessageSize is bench's (bench.DefaultMaxMessageSize): room for the 1 MiB shapes and
	// whatever envelope a tunnel adds.
	DefaultMaxMessageSize = 8 << 20
	// DefaultConnectTimeout bounds how long a tunnel's agents may take to become callable.
	DefaultConnectTimeout = 2 * time.Minute
	// connectPoll is how often an adapter whose agents nothing signals checks whether they are in.
	connectPoll = 5 * time.Millisecond
	// MaxAgents bounds Config.Agents: every agent is a real connection with its goroutines.
	MaxAgents = 100_000
)

// Config is what every adapter is started with.
type Config struct {
	// Agents is how many agents ConnectAgents starts (ids 1..Agents); at least 1.
	Agents int
	// MaxMessageSize bounds one gRPC message on every hop; zero means DefaultMaxMessageSize.
	MaxMessageSize int
	// Register registers the services agent id serves; nil means the demo service (demo.Register).
	// Tests give each agent an answer of its own with it, to see that Conn(id) reaches agent id.
	Register func(id int64, s grpc.ServiceRegistrar)
	// AgentDial, when set, is how agent id connects to addr, the server side's listener for agents,
	// every time it connects: the chaos runner puts a fault proxy on each agent's link there
	// (scenario run --tunnel). For direct, where the caller connects to agent id's own server, it
	// carries that connection: the same link, dialed the other way. nil dials addr over TCP. An
	// adapter that ignores it still runs in bench; scenario run refuses it, since faults on its
	// agents' links would not reach them.
	AgentDial func(ctx context.Context, id int64, addr string) (net.Conn, error)
}

// RegisterServices registers agent id's services on s: adapters call it for each agent.
func (c Config) RegisterServices(id int64, s grpc.ServiceRegistrar) {
	if c.Register == nil {
		demo.Register(s)
		return
	}
	c.Register(id, s)
}

func (c *Config) defaults() error {
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	var errs []error
	if c.Agents < 1 || c.Agents > MaxAgents {
		errs = append(errs, fmt.Errorf("agents must be between 1 and %d, got %d", MaxAgents, c.Agents))
	}
	if c.MaxMessageSize < 0 {
		errs = append(errs, fmt.Errorf("max message size must not be negative, got %d", c.MaxMessageSize))
	}
	return errors.Join(errs...)
}

// Adapter starts one kind of tunnel.
type Adapter interface {
	// Start starts the server side only (no agent yet), on loopback. cfg is valid and has its defaults.
	Start(ctx context.Context, cfg Config) (Tunnel, error)
}

// StartFunc is an Adapter made of its Start function.
type StartFunc func(ctx context.Context, cfg Config) (Tunnel, error)

// Start implements Adapter.
func (f StartFunc) Start(ctx context.Context, cfg Config) (Tunnel, error) { return f(ctx, cfg) }

// Tunnel is a running tunnel: its server side, and its agents once connected.
type Tunnel interface {
	// ConnectAgents starts agents 1..Config.Agents, each serving the demo service behind the tunnel,
	// and returns once every one can be called (within ctx). It is called once.
	ConnectAgents(ctx context.Context) error
	// Conn is how a caller at the server side reaches agent id through the tunnel. The tunnel owns it
	// (Close closes it); callers may share it.
	Conn(id int64) (grpc.ClientConnInterface, error)
	// Close stops agents and server and ends every goroutine they started, calls in flight within ctx.
	// It may be called after a failed ConnectAgents.
	Close(ctx context.Context) error
}

// CheckAgent says whether id is one of the agents; adapters check Conn's argument with it.
func (c Config) CheckAgent(id int64) error {
	if id < 1 || id > int64(c.Agents) {
		return fmt.Errorf("no agent %d: agents are 1..%d", id, c.Agents)
	}
	return nil
}
