package runner

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"

	"github.com/tunnelbench/tunnelbench/internal/poll"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/chaos"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
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
	redis   *redisServer

	kas     []*kasNode
	callers []*grpc.ClientConn

	mu     sync.Mutex
	agents map[int64]*agentNode

	accepts acceptLog
}

type kasNode struct {
	i        int
	srv      *kas.Server
	mp       *metrics.Provider
	alive    atomic.Bool
	redisTr  *tracker.Redis
	agentLis *countingListener
}

type agentNode struct {
	id    int64
	agent *tunclient.Agent
	conn  *grpc.ClientConn
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

func startTopology(ctx context.Context, sc *scenario.Scenario, log *slog.Logger) (_ *topology, err error) {
	t := &topology{sc: sc, log: log, proxies: chaos.NewProxies(), agents: map[int64]*agentNode{}, secret: make([]byte, 32)}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	if _, err := rand.Read(t.secret); err != nil {
		return nil, err
	}
	tokens := map[string]int64{}
	for _, id := range sc.Topology.AgentIDs() {
		tokens[bench.AgentToken(id)] = id
	}
	if t.tokens, err = auth.NewStaticTokens(tokens); err != nil {
		return nil, err
	}
	switch sc.Topology.Tracker {
	case scenario.TrackerRedis:
		if t.redis, err = startRedis(); err != nil {
			return nil, err
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
	if err := waitUntil(ctx, 2*time.Minute, func() bool { return t.stats().IdleTunnels >= want }); err != nil {
		return nil, fmt.Errorf("agents did not connect: %d of %d idle tunnels: %w", t.stats().IdleTunnels, want, err)
	}
	return t, nil
}

func (t *topology) startKas(i int) error {
	n := &kasNode{i: i}
	n.alive.Store(true)
	mp, err := metrics.New()
	if err != nil {
		return err
	}
	n.mp = mp
	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	n.agentLis = &countingListener{Listener: al, log: &t.accepts}
	api, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	priv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	name := chaos.KasName(i)
	callerAddr, err := t.proxies.Add(chaos.LinkCallerKas, name, api.Addr().String())
	if err != nil {
		return err
	}
	privAddr, err := t.proxies.Add(chaos.LinkKasKas, name, priv.Addr().String())
	if err != nil {
		return err
	}
	for _, id := range t.sc.Topology.AgentIDs() {
		if _, err := t.proxies.Add(chaos.LinkAgentKas, chaos.AgentName(id)+"/"+name, al.Addr().String()); err != nil {
			return err
		}
	}
	cfg := kas.Config{
		Dev:              true, // loopback and in-memory listeners only
		AgentListener:    n.agentLis,
		APIListener:      api,
		PrivateListener:  priv,
		Authenticator:    t.tokens,
		FindTimeout:      t.sc.Topology.FindTimeout,
		MaxConnectionAge: t.sc.Topology.MaxConnectionAge,
		PrivateURL:       "grpc://" + privAddr,
		PrivateAPISecret: t.secret,
		TrackerRefresh:   trackerRefresh,
		ShutdownGrace:    kasShutdown,
		Metrics:          mp,
		Log:              t.log.With("kas", i),
	}
	if cfg.MaxConnectionAge <= 0 {
		cfg.MaxConnectionAge = -1
	}
	switch {
	case t.redis != nil:
		redisAddr, err := t.proxies.Add(chaos.LinkKasRedis, name, t.redis.addr)
		if err != nil {
			return err
		}
		if n.redisTr, err = tracker.NewRedis(tracker.RedisConfig{Address: redisAddr, TTL: trackerTTL, RefreshPeriod: trackerRefresh,
			OpTimeout: time.Second, DialTimeout: time.Second}); err != nil {
			return err
		}
		cfg.Tracker = n.redisTr
	case t.sc.Topology.Kas > 1:
		cfg.Tracker = t.memory
	}
	if n.srv, err = kas.New(cfg); err != nil {
		return err
	}
	if err := n.srv.Start(); err != nil {
		return err
	}
	t.kas = append(t.kas, n)
	caller, err := grpc.NewClient(callerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(scenario.MaxPayload+(64<<10)), grpc.MaxCallSendMsgSize(scenario.MaxPayload+(64<<10))))
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
			p := t.proxies.Get(chaos.LinkAgentKas, chaos.AgentName(id)+"/"+chaos.KasName(i))
			var d net.Dialer
			return d.DialContext(ctx, "tcp", p.Listen())
		}
		return nil, errors.New("no kas is alive")
	}
}

func (t *topology) startAgent(id int64) error {
	conn, err := tunclient.DialKas("passthrough:kas", bench.AgentToken(id), grpc.WithContextDialer(t.dialer(id)))
	if err != nil {
		return err
	}
	a, err := tunclient.New(tunclient.Config{
		KasConn:        conn,
		MinIdle:        t.sc.Topology.TunnelsPerAgent,
		MaxConnections: max(tunclient.DefaultMaxConnections, t.sc.Topology.TunnelsPerAgent),
		Log:            t.log.With("agent_id", id),
	})
	if err != nil {
		_ = conn.Close()
		return err
	}
	demo.Register(a)
	if err := a.Start(); err != nil {
		a.Stop(context.Background())
		_ = conn.Close()
		return err
	}
	t.mu.Lock()
	t.agents[id] = &agentNode{id: id, agent: a, conn: conn}
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
		st := n.srv.Registry().Stats()
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
		gs = append(gs, n.mp.Registry())
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
	t.kas[i].srv.Kill()
	return nil
}

func (t *topology) StopKas(ctx context.Context, i int) error {
	if i < 0 || i >= len(t.kas) || !t.kas[i].alive.Swap(false) {
		return fmt.Errorf("kas %d is not running", i)
	}
	t.kas[i].srv.Shutdown(ctx)
	return nil
}

func (t *topology) takeAgents(ids []int64) ([]*agentNode, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*agentNode
	for _, id := range ids {
		n := t.agents[id]
		if n == nil {
			return nil, fmt.Errorf("agent %d is not running", id)
		}
		out = append(out, n)
	}
	for _, id := range ids {
		delete(t.agents, id)
	}
	return out, nil
}

// KillAgents drops the agents' connections at once, as a crashed process would.
func (t *topology) KillAgents(_ context.Context, ids []int64) error {
	nodes, err := t.takeAgents(ids)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = n.conn.Close()
			done, cancel := context.WithCancel(context.Background())
			cancel()
			n.agent.Stop(done)
		}()
	}
	wg.Wait()
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
	nodes, err := t.takeAgents(ids)
	if err != nil {
		return err
	}
	stopAgents(nodes)
	return t.StartAgents(ctx, ids)
}

// stopAgents stops agents gracefully, all at once: calls in flight finish within agentStopGrace.
func stopAgents(nodes []*agentNode) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), agentStopGrace)
			defer cancel()
			n.agent.Stop(ctx)
			_ = n.conn.Close()
		}()
	}
	wg.Wait()
}

func (t *topology) StopRedis(context.Context) error {
	if t.redis == nil {
		return errors.New("the topology has no Redis")
	}
	return t.redis.stop()
}

func (t *topology) StartRedis(context.Context) error {
	if t.redis == nil {
		return errors.New("the topology has no Redis")
	}
	return t.redis.start()
}

// close stops everything the topology started.
func (t *topology) close() {
	t.mu.Lock()
	nodes := make([]*agentNode, 0, len(t.agents))
	for _, n := range t.agents {
		nodes = append(nodes, n)
	}
	t.agents = map[int64]*agentNode{}
	t.mu.Unlock()
	stopAgents(nodes)
	for _, c := range t.callers {
		_ = c.Close()
	}
	for _, n := range t.kas {
		if n.srv == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), kasShutdown)
		n.srv.Shutdown(ctx)
		cancel()
		_ = n.mp.Shutdown(context.Background())
		if n.redisTr != nil {
			_ = n.redisTr.Close()
		}
	}
	t.proxies.Close()
	if t.redis != nil {
		_ = t.redis.stop()
		_ = os.RemoveAll(t.redis.dir)
	}
}

func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	return poll.Until(ctx, timeout, 10*time.Millisecond, cond)
}

// redisServer is a throw-away redis-server on loopback that the scenario can stop and start again.
type redisServer struct {
	bin, addr, port, dir string
	cmd                  *exec.Cmd
	done                 chan struct{}
}

func startRedis() (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("a scenario with tracker: redis needs redis-server (apt-get install -y redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, port, _ := net.SplitHostPort(addr)
	dir, err := os.MkdirTemp("", "tunnelbench-redis-")
	if err != nil {
		return nil, err
	}
	r := &redisServer{bin: bin, addr: addr, port: port, dir: dir}
	return r, r.start()
}

func (r *redisServer) start() error {
	if r.cmd != nil {
		return errors.New("redis is already running")
	}
	r.cmd = exec.Command(r.bin, "--port", r.port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
	if err := r.cmd.Start(); err != nil {
		r.cmd = nil
		return fmt.Errorf("start redis-server: %w", err)
	}
	r.done = make(chan struct{})
	cmd, done := r.cmd, r.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return waitUntil(context.Background(), 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", r.addr, 100*time.Millisecond)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
}

func (r *redisServer) stop() error {
	if r.cmd == nil {
		return errors.New("redis is not running")
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
	return nil
}
