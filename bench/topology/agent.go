package topology

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunclient/h2conn"
	"github.com/tunnelbench/tunnelbench/internal/poll"
)

// Agent defaults.
const (
	// DefaultStopGrace bounds a graceful stop of agents that a failed start leaves behind.
	DefaultStopGrace = 10 * time.Second
	// DefaultConnectTimeout bounds how long a topology's agents may take to open their idle tunnels.
	DefaultConnectTimeout = 2 * time.Minute
	// idleInterval is how often WaitIdle counts idle tunnels.
	idleInterval = 5 * time.Millisecond
)

// AgentConfig is one agent of a topology: a tunclient agent serving the demo service. Zero values are
// fine, except Route.
type AgentConfig struct {
	ID int64
	// Route is how the agent reaches kas (Kas.AgentRoute).
	Route Route
	// Token is the agent's token; empty means AgentToken(ID).
	Token string
	// DialOptions are added to the agent's connection to kas. They are gRPC-go's, so setting them
	// selects GRPCClient.
	DialOptions []grpc.DialOption
	// GRPCClient connects the agent with gRPC-go's ClientConn (tunclient.DialKas) instead of h2conn
	// (tunclient.DialKasHTTP2), the default.
	GRPCClient bool
	// TLS, when set, connects the agent to kas over TLS (h2conn only: with GRPCClient or DialOptions,
	// TLS is theirs to set).
	TLS *tls.Config
	// MinIdle is how many idle tunnels the agent keeps; zero means tunclient's default. The agent may
	// open at least that many tunnels.
	MinIdle        int
	MaxMessageSize int
	Log            *slog.Logger
	// Adjust, when set, changes the agent's config last (tests: meters, backoff, interceptors).
	Adjust func(*tunclient.Config)
	// Register registers the services the agent serves; nil registers the demo service.
	Register func(*tunclient.Agent) error
}

// Agent is a running agent and its connection to kas.
type Agent struct {
	ID    int64
	Agent *tunclient.Agent
	conn  tunclient.KasConn
}

// StartAgent connects an agent to kas and starts it. It does not wait for its tunnels.
func StartAgent(cfg AgentConfig) (*Agent, error) {
	if cfg.Route.Target == "" {
		return nil, fmt.Errorf("agent %d: no route to kas", cfg.ID)
	}
	token := cmp.Or(cfg.Token, AgentToken(cfg.ID))
	var conn tunclient.KasConn
	var err error
	if cfg.TLS != nil && (cfg.GRPCClient || len(cfg.DialOptions) > 0) {
		return nil, fmt.Errorf("agent %d: TLS is set for h2conn, and the agent dials with gRPC-go's client", cfg.ID)
	}
	if cfg.GRPCClient || len(cfg.DialOptions) > 0 {
		conn, err = tunclient.DialKas(cfg.Route.Target, token, append(cfg.Route.DialOptions(), cfg.DialOptions...)...)
	} else {
		conn, err = tunclient.DialKasHTTP2(cfg.Route.Target, token, h2conn.Options{Dial: cfg.Route.Dial, TLS: cfg.TLS})
	}
	if err != nil {
		return nil, fmt.Errorf("agent %d: %w", cfg.ID, err)
	}
	tc := tunclient.Config{
		KasConn:        conn,
		MinIdle:        cfg.MinIdle,
		MaxConnections: max(tunclient.DefaultMaxConnections, cfg.MinIdle),
		MaxMessageSize: cfg.MaxMessageSize,
		Log:            cfg.Log,
	}
	if cfg.Adjust != nil {
		cfg.Adjust(&tc)
	}
	a, err := tunclient.New(tc)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("agent %d: %w", cfg.ID, err)
	}
	if cfg.Register == nil {
		demo.Register(a)
	} else {
		err = cfg.Register(a)
	}
	if err == nil {
		err = a.Start()
	}
	if err != nil {
		a.Stop(context.Background())
		_ = conn.Close()
		return nil, fmt.Errorf("agent %d: %w", cfg.ID, err)
	}
	return &Agent{ID: cfg.ID, Agent: a, conn: conn}, nil
}

// Stop stops the agent gracefully: calls in flight finish within ctx. Then its connection closes.
func (a *Agent) Stop(ctx context.Context) {
	a.Agent.Stop(ctx)
	_ = a.conn.Close()
}

// Kill drops the agent's connection at once, as a crashed process would.
func (a *Agent) Kill() {
	_ = a.conn.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	a.Agent.Stop(done)
}

// Agents are agents that stop together.
type Agents []*Agent

// StartAgents starts agents 1..n, agent id configured by config(id). When one fails, those started
// stop again (within DefaultStopGrace).
func StartAgents(ctx context.Context, n int, config func(id int64) (AgentConfig, error)) (Agents, error) {
	as := make(Agents, 0, max(n, 0))
	for id := int64(1); id <= int64(n); id++ {
		a, err := startAgent(ctx, id, config)
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), DefaultStopGrace)
			as.Stop(sctx)
			cancel()
			return nil, err
		}
		as = append(as, a)
	}
	return as, nil
}

func startAgent(ctx context.Context, id int64, config func(id int64) (AgentConfig, error)) (*Agent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := config(id)
	if err != nil {
		return nil, fmt.Errorf("agent %d: %w", id, err)
	}
	return StartAgent(cfg)
}

// Idle is the number of idle tunnels of all the agents, as they count them.
func (as Agents) Idle() int {
	n := 0
	for _, a := range as {
		n += a.Agent.Stats().Idle
	}
	return n
}

// Stop stops every agent gracefully, all at once: calls in flight finish within ctx.
func (as Agents) Stop(ctx context.Context) {
	var wg sync.WaitGroup
	for _, a := range as {
		wg.Go(func() { a.Stop(ctx) })
	}
	wg.Wait()
}

// Kill drops every agent's connection at once, as crashed processes would.
func (as Agents) Kill() {
	var wg sync.WaitGroup
	for _, a := range as {
		wg.Go(a.Kill)
	}
	wg.Wait()
}

// WaitIdle waits until idle() reaches want, within timeout, and says how far it got when it did not.
func WaitIdle(ctx context.Context, timeout time.Duration, want int64, idle func() int64) error {
	if err := poll.Until(ctx, timeout, idleInterval, func() bool { return idle() >= want }); err != nil {
		return fmt.Errorf("agents did not connect: %d of %d idle tunnels: %w", idle(), want, err)
	}
	return nil
}
