// Package testenv starts real kas and agents for tests: kas with its listeners on loopback TCP (or on
// in-memory listeners), agents that serve the test service through real tunnels, and clients for both
// routing APIs. Everything stops when the test ends. It starts them with bench/topology, adding the
// test service, quick timeouts and failing the test on error.
//
// It is test support only; production code never imports it.
package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient/reconnect"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testsvc"
)

// Transport is how agents and callers reach kas.
type Transport string

// Transports.
const (
	TCP     Transport = "tcp"
	Bufconn Transport = "bufconn"
)

// Options configure Start. Zero values are fine.
type Options struct {
	Transport Transport
	// Agents is the number of agents, with ids 1..Agents. Zero means one; negative means none.
	Agents int
	// Kas adjusts kas's config before it starts.
	Kas func(*kas.Config)
	// Agent adjusts each agent's config before it starts.
	Agent func(id int64, c *tunclient.Config)
	// Register registers extra services on each agent before it starts.
	Register func(id int64, a *tunclient.Agent)
	// AgentDial adds dial options to each agent's connection to kas; they select gRPC-go's client.
	AgentDial []grpc.DialOption
	// GRPCClient connects agents with gRPC-go's ClientConn instead of h2conn, the default.
	GRPCClient bool
	// CallerDial adds dial options to the public API client.
	CallerDial []grpc.DialOption
}

// AgentEnv is one running agent.
type AgentEnv struct {
	ID      int64
	Agent   *tunclient.Agent
	Service *testsvc.Server
	Metrics *metrics.Provider
	agent   *topology.Agent
	stopped bool
}

// Env is a running kas with its agents.
type Env struct {
	t       testing.TB
	opts    Options
	Kas     *kas.Server
	Metrics *metrics.Provider
	Agents  map[int64]*AgentEnv
	Public  *grpc.ClientConn
	kas     *topology.Kas
	kasDown bool
}

// Token is the agent token testenv gives agent id.
func Token(id int64) string { return fmt.Sprintf("token-%d", id) }

// Test timing: short, so that tests that wait for a timeout or a reconnect are quick.
const (
	findTimeout   = 5 * time.Second
	shutdownGrace = 5 * time.Second
)

// backoff reconnects agents quickly.
var backoff = reconnect.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond, Factor: 1.6, Jitter: 0.2}

// Start starts kas and the agents and waits until every agent has its idle tunnels.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Transport == "" {
		opts.Transport = TCP
	}
	if opts.Agents == 0 {
		opts.Agents = 1
	}
	link := topology.TCP
	switch opts.Transport {
	case TCP:
	case Bufconn:
		link = topology.InMemory
	default:
		t.Fatalf("unknown transport %q", opts.Transport)
	}
	auth, err := topology.AgentTokens(max(opts.Agents, 0)+10, Token)
	if err != nil {
		t.Fatal(err)
	}
	k, err := topology.StartKas(topology.KasConfig{Link: link, Auth: auth, FindTimeout: findTimeout, ShutdownGrace: shutdownGrace, Adjust: opts.Kas})
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{t: t, opts: opts, Kas: k.Server, Metrics: k.Metrics, Agents: map[int64]*AgentEnv{}, kas: k}
	t.Cleanup(e.stopKas)
	if e.Public, err = k.DialAPI(opts.CallerDial...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Public.Close() })

	for id := int64(1); id <= int64(opts.Agents); id++ {
		e.StartAgent(id)
	}
	for id := range e.Agents {
		e.WaitIdle(id, 1)
	}
	return e
}

// StartAgent starts (or restarts) agent id and returns it. It does not wait for its tunnels.
func (e *Env) StartAgent(id int64) *AgentEnv {
	e.t.Helper()
	adjust := func(c *tunclient.Config) {
		c.ShutdownReconnectJitter = 100 * time.Millisecond
		if e.opts.Agent != nil {
			e.opts.Agent(id, c)
		}
	}
	register := func(a *tunclient.Agent) {
		if e.opts.Register != nil {
			e.opts.Register(id, a)
		}
	}
	ae := startAgent(e.t, e.kas, id, e.opts, adjust, register)
	e.Agents[id] = ae
	return ae
}

// startAgent starts agent id on k, serving the test service, with a meter of its own and a quick
// backoff; adjust and register are the test's hooks. The agent stops when the test ends.
func startAgent(t testing.TB, k *topology.Kas, id int64, opts Options, adjust func(*tunclient.Config), register func(*tunclient.Agent)) *AgentEnv {
	t.Helper()
	route, err := k.AgentRoute(id)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	ae := &AgentEnv{ID: id, Metrics: mp}
	ae.agent, err = topology.StartAgent(topology.AgentConfig{
		ID: id, Route: route, Token: Token(id), DialOptions: opts.AgentDial, GRPCClient: opts.GRPCClient,
		Adjust: func(c *tunclient.Config) {
			c.Meter, c.Backoff = mp.Meter("agent"), backoff
			adjust(c)
		},
		Register: func(a *tunclient.Agent) error {
			ae.Service = testsvc.Register(a)
			register(a)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ae.Agent = ae.agent.Agent
	t.Cleanup(func() { stopAgent(ae) })
	return ae
}

// StopAgent stops an agent gracefully (calls in flight finish) and closes its connection.
func (e *Env) StopAgent(ae *AgentEnv) { stopAgent(ae) }

func stopAgent(ae *AgentEnv) {
	if ae.stopped {
		return
	}
	ae.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ae.agent.Stop(ctx)
}

func (e *Env) stopKas() {
	if e.kasDown {
		return
	}
	e.kasDown = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.Kas.Shutdown(ctx)
}

// ShutdownKas shuts kas down now (it would at the end of the test anyway).
func (e *Env) ShutdownKas(ctx context.Context) {
	e.kasDown = true
	e.Kas.Shutdown(ctx)
}

// WaitIdle waits until kas holds at least n idle tunnels of agent id... in total (kas does not break them
// down by agent), failing the test after 10 s.
func (e *Env) WaitIdle(_ int64, n int64) {
	e.t.Helper()
	Eventually(e.t, 10*time.Second, func() bool { return e.Kas.Registry().Stats().IdleTunnels >= n },
		"kas never had %d idle tunnels", n)
}

// Eventually polls cond every 10 ms until it holds or timeout passes, then fails the test.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(format, args...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// AgentCtx returns ctx with the routing metadata for agent id.
func AgentCtx(ctx context.Context, id int64, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, append([]string{rpc.RoutingAgentIDMetadataKey, fmt.Sprint(id)}, kv...)...)
}

// Scrape reads the metrics a provider exposes, keyed by family name.
func Scrape(t testing.TB, p *metrics.Provider) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := p.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// Value is the value of the metric in fam whose labels include every given name=value pair: a counter,
// a gauge, or a histogram's sample count. It returns -1 when no metric matches.
func Value(fam *dto.MetricFamily, labels ...string) float64 {
	if fam == nil {
		return -1
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
