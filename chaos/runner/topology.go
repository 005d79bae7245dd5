package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	topo "github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/bench/topology/proc"
	"github.com/tunnelbench/tunnelbench/chaos"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
	"github.com/tunnelbench/tunnelbench/core/tracker"
)

// Timing of the chaos topology, chosen so that faults show within a scenario's short run.
const (
	// trackerTTL lets the records of a killed kas vanish within a typical scenario.
	trackerTTL     = 15 * time.Second
	trackerRefresh = 5 * time.Second
	// agentStopGrace bounds a graceful agent stop (restart-agents).
	agentStopGrace = 10 * time.Second
	kasShutdown    = 10 * time.Second
)

// topology is a scenario's kas instances and agents in this process, with a toxiproxy proxy on every
// link: callers reach kas i at proxy caller->kas/kas-i, agent N reaches kas i at agent->kas/agent-N/kas-i,
// every kas reaches kas i's private API at kas->kas/kas-i and Redis at kas->redis/kas-i.
type topology struct {
	sc      *scenario.Scenario
	log     *slog.Logger
	proxies *chaos.Proxies
	secret  []byte
	tokens  *auth.StaticTokens
	memory  *tracker.Memory
	redis   *proc.Redis

	kas     []*kasNode
	callers []*grpc.ClientConn

	mu     sync.Mutex
	agents map[int64]*topo.Agent

	accepts acceptLog
}

type kasNode struct {
	i     int
	k     *topo.Kas
	alive atomic.Bool
}

// acceptLog records when kas accepted agent connections, for the reconnect rate.
type acceptLog struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *acceptLog) add(t time.Time) {
	a.mu.Lock()
	a.times = append(a.times, t)
	a.mu.Unlock()
}

func (a *acceptLog) snapshot() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.times...)
}

type countingListener struct {
	net.Listener
	log *acceptLog
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.log.add(time.Now())
	}
	return c, err
}

// proxyLinks are the chaos links of the topology's hops.
var proxyLinks = map[topo.HopKind]chaos.Link{
	topo.CallerKas: chaos.LinkCallerKas,
	topo.AgentKas:  chaos.LinkAgentKas,
	topo.KasKas:    chaos.LinkKasKas,
	topo.KasRedis:  chaos.LinkKasRedis,
}

// proxyLink is loopback TCP with a proxy on every hop, named as selections expect (see chaos.Select),
// that counts the connections kas accepts from agents.
type proxyLink struct {
	proxies *chaos.Proxies
	accepts *acceptLog
}

func (l proxyLink) Listen(h topo.Hop) (net.Listener, topo.Route, error) {
	ln, r, err := topo.TCP.Listen(h)
	if err == nil && h.Kind == topo.AgentKas {
		ln = &countingListener{Listener: ln, log: l.accepts}
	}
	return ln, r, err
}

// Route is the hop's proxy, added the first time the hop is asked for: while the topology starts, from
// one goroutine (agents' dialers later only find theirs).
func (l proxyLink) Route(h topo.Hop, direct topo.Route) (topo.Route, error) {
	link, ok := proxyLinks[h.Kind]
	if !ok {
		return topo.Route{}, fmt.Errorf("no chaos link for %s", h.Kind)
	}
	name := chaos.KasName(h.Kas)
	if h.Kind == topo.AgentKas {
		name = chaos.AgentName(h.Agent) + "/" + name
	}
	if p := l.proxies.Get(link, name); p != nil {
		return topo.Route{Target: p.Listen()}, nil
	}
	addr, err := l.proxies.Add(link, name, direct.Target)
	return topo.Route{Target: addr}, err
}

func startTopology(ctx context.Context, sc *scenario.Scenario, log *slog.Logger) (_ *topology, err error) {
	t := &topology{sc: sc, log: log, proxies: chaos.NewProxies(), agents: map[int64]*topo.Agent{}}
	defer func() {
		if err != nil {
			_ = t.close()
		}
	}()
	if t.secret, err = topo.NewSecret(); err != nil {
		return nil, err
	}
	if t.tokens, err = topo.AgentTokens(sc.Topology.Agents, topo.AgentToken); err != nil {
		return nil, err
	}
	switch sc.Topology.Tracker {
	case scenario.TrackerRedis:
		if t.redis, err = proc.StartRedis(""); err != nil {
			return nil, fmt.Errorf("a scenario with tracker: redis needs Redis: %w", err)
		}
	default:
		t.memory = tracker.NewMemory(trackerTTL)
	}
	for i := range sc.Topology.Kas {
		if err := t.startKas(i); err != nil {
			return nil, fmt.Errorf("start kas %d: %w", i, err)
		}
	}
	for _, id := range sc.Topology.AgentIDs() {
		if err := t.startAgent(id); err != nil {
			return nil, fmt.Errorf("start agent %d: %w", id, err)
		}
	}
	want := int64(sc.Topology.Agents * sc.Topology.TunnelsPerAgent)
	if err := topo.WaitIdle(ctx, topo.DefaultConnectTimeout, want, func() int64 { return t.stats().IdleTunnels }); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *topology) startKas(i int) error {
	cfg := topo.KasConfig{
		Index:            i,
		Link:             proxyLink{proxies: t.proxies, accepts: &t.accepts},
		Auth:             t.tokens,
		Private:          true, // kas->kas proxies exist whatever the tracker
		Secret:           t.secret,
		FindTimeout:      t.sc.Topology.FindTimeout,
		MaxConnectionAge: t.sc.Topology.MaxConnectionAge,
		TrackerRefresh:   trackerRefresh,
		ShutdownGrace:    kasShutdown,
		Log:              t.log.With("kas", i),
	}
	switch {
	case t.redis != nil:
		cfg.Redis = &tracker.RedisConfig{Address: t.redis.Addr(), TTL: trackerTTL, RefreshPeriod: trackerRefresh,
			OpTimeout: time.Second, DialTimeout: time.Second}
	case t.sc.Topology.Kas > 1:
		cfg.Tracker = t.memory
	}
	k, err := topo.StartKas(cfg)
	if err != nil {
		return err
	}
	n := &kasNode{i: i, k: k}
	n.alive.Store(true)
	t.kas = append(t.kas, n)
	// A proxy from every agent to every kas, so that agents can re-home (see dialer).
	for _, id := range t.sc.Topology.AgentIDs() {
		if _, err := k.AgentRoute(id); err != nil {
			return err
		}
	}
	caller, err := k.DialAPI(topo.MaxMessageSize(scenario.MaxPayload + (64 << 10)))
	if err != nil {
		return err
	}
	t.callers = append(t.callers, caller)
	return nil
}

// dialer is how agent id reaches kas: like a load balancer that health-checks its backends, it picks the
// agent's home kas while it is alive and another live kas otherwise, always through the link's proxy.
func (t *topology) dialer(id int64) func(context.Context, string) (net.Conn, error) {
	home := t.sc.Topology.HomeKas(id)
	return func(ctx context.Context, _ string) (net.Conn, error) {
		n := len(t.kas)
		for k := range n {
			i := (home + k) % n
			if !t.kas[i].alive.Load() {
				continue
			}
			r, err := t.kas[i].k.AgentRoute(id)
			if err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", r.Target)
		}
		return nil, errors.New("no kas is alive")
	}
}

func (t *topology) startAgent(id int64) error {
	a, err := topo.StartAgent(topo.AgentConfig{
		ID:      id,
		Route:   topo.Route{Target: "passthrough:kas", Dial: t.dialer(id)},
		MinIdle: t.sc.Topology.TunnelsPerAgent,
		Log:     t.log.With("agent_id", id),
	})
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.agents[id] = a
	t.mu.Unlock()
	return nil
}

// stats sums the registries of the live kas.
func (t *topology) stats() registry.Stats {
	var s registry.Stats
	for _, n := range t.kas {
		if !n.alive.Load() {
			continue
		}
		st := n.k.Server.Registry().Stats()
		s.IdleTunnels += st.IdleTunnels
		s.BusyTunnels += st.BusyTunnels
		s.WaitingCalls += st.WaitingCalls
		s.ConnectedAgents += st.ConnectedAgents
	}
	return s
}

func (t *topology) gatherers() []prometheus.Gatherer {
	gs := make([]prometheus.Gatherer, 0, len(t.kas))
	for _, n := range t.kas {
		gs = append(gs, n.k.Metrics.Registry())
	}
	return gs
}

// aliveKas lists the kas that callers can enter at.
func (t *topology) aliveKas() []int {
	var out []int
	for _, n := range t.kas {
		if n.alive.Load() {
			out = append(out, n.i)
		}
	}
	return out
}

// chaos.Target: process faults act on the topology through these.

func (t *topology) KasCount() int { return len(t.kas) }

func (t *topology) Agents() []int64 { return t.sc.Topology.AgentIDs() }

func (t *topology) KillKas(_ context.Context, i int) error {
	if i < 0 || i >= len(t.kas) || !t.kas[i].alive.Swap(false) {
		return fmt.Errorf("kas %d is not running", i)
	}
	t.kas[i].k.Kill()
	return nil
}

func (t *topology) StopKas(ctx context.Context, i int) error {
	if i < 0 || i >= len(t.kas) || !t.kas[i].alive.Swap(false) {
		return fmt.Errorf("kas %d is not running", i)
	}
	t.kas[i].k.Server.Shutdown(ctx) // its metrics stay readable until close
	return nil
}

func (t *topology) takeAgents(ids []int64) (topo.Agents, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out topo.Agents
	for _, id := range ids {
		a := t.agents[id]
		if a == nil {
			return nil, fmt.Errorf("agent %d is not running", id)
		}
		out = append(out, a)
	}
	for _, id := range ids {
		delete(t.agents, id)
	}
	return out, nil
}

// KillAgents drops the agents' connections at once, as a crashed process would.
func (t *topology) KillAgents(_ context.Context, ids []int64) error {
	agents, err := t.takeAgents(ids)
	if err != nil {
		return err
	}
	agents.Kill()
	return nil
}

func (t *topology) StartAgents(ctx context.Context, ids []int64) error {
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.startAgent(id); err != nil {
			return fmt.Errorf("start agent %d: %w", id, err)
		}
	}
	return nil
}

// RestartAgents stops the agents gracefully (calls in flight finish) and starts them again.
func (t *topology) RestartAgents(ctx context.Context, ids []int64) error {
	agents, err := t.takeAgents(ids)
	if err != nil {
		return err
	}
	stopAgents(agents)
	return t.StartAgents(ctx, ids)
}

// stopAgents stops agents gracefully, all at once: calls in flight finish within agentStopGrace.
func stopAgents(agents topo.Agents) {
	ctx, cancel := context.WithTimeout(context.Background(), agentStopGrace)
	defer cancel()
	agents.Stop(ctx)
}

func (t *topology) StopRedis(context.Context) error {
	if t.redis == nil {
		return errors.New("the topology has no Redis")
	}
	return t.redis.Kill()
}

func (t *topology) StartRedis(context.Context) error {
	if t.redis == nil {
		return errors.New("the topology has no Redis")
	}
	return t.redis.Start()
}

// close stops everything the topology started.
func (t *topology) close() error {
	t.mu.Lock()
	agents := make(topo.Agents, 0, len(t.agents))
	for _, a := range t.agents {
		agents = append(agents, a)
	}
	t.agents = map[int64]*topo.Agent{}
	t.mu.Unlock()
	stopAgents(agents)
	for _, c := range t.callers {
		_ = c.Close()
	}
	for _, n := range t.kas {
		ctx, cancel := context.WithTimeout(context.Background(), kasShutdown)
		n.k.Shutdown(ctx)
		cancel()
	}
	t.proxies.Close()
	if t.redis != nil {
		_ = t.redis.Close()
	}
	return nil
}
