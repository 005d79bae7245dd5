package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/bench/topology/proc"
	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
)

// Transport is how agents and callers reach kas in an in-process topology.
type Transport string

// Transports.
const (
	TransportTCP     Transport = "tcp"
	TransportBufconn Transport = "bufconn"
)

// Topology defaults.
const (
	// DefaultTunnelsPerAgent is the agent's default pool (reusable tunnels); the single-use agent keeps
	// its own default, tunclient.DefaultMinIdleSingleUse.
	DefaultTunnelsPerAgent = tunclient.DefaultMinIdle
	// DefaultMaxMessageSize leaves room for the 1 MiB shapes and their envelopes.
	DefaultMaxMessageSize = 8 << 20
)

// TopologyConfig describes an in-process topology.
type TopologyConfig struct {
	Kas             int
	Agents          int
	TunnelsPerAgent int
	Transport       Transport
	FindTimeout     time.Duration
	// MaxConnectionAge <= 0 disables rotation.
	MaxConnectionAge time.Duration
	MaxMessageSize   int
	// SingleUseAgent adds one agent (SingleUseAgentID) whose tunnels carry one call each, for the
	// tunnel-single-use path.
	SingleUseAgent bool
	// Processes runs every kas, agent and the direct server as a separate process of Binary (default:
	// this program, which must offer the kas, agentk and demo-server commands, as tunnelbench does).
	Processes bool
	Binary    string
	// Target points the load at an existing kas deployment instead of starting one: the address of its
	// public gRPC API. TargetDirect (optional) is the same demo service reachable directly, for the
	// baseline; TargetMetrics (optional) is a kas /metrics URL, for routing figures.
	Target        string
	TargetDirect  string
	TargetMetrics string
	// TargetSecurity is how calls reach a secured Target: TLS and a caller token.
	TargetSecurity TargetSecurity
}

func (c *TopologyConfig) defaults() error {
	if c.Kas == 0 {
		c.Kas = 1
	}
	if c.Agents == 0 {
		c.Agents = 1
	}
	if c.TunnelsPerAgent == 0 {
		c.TunnelsPerAgent = DefaultTunnelsPerAgent
	}
	if c.Transport == "" {
		c.Transport = TransportTCP
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.MaxConnectionAge <= 0 {
		c.MaxConnectionAge = -1
	}
	var errs []error
	if c.Kas < 1 || c.Agents < 0 || c.TunnelsPerAgent < 1 {
		errs = append(errs, fmt.Errorf("topology needs kas >= 1, agents >= 0, tunnels per agent >= 1; got %d, %d, %d", c.Kas, c.Agents, c.TunnelsPerAgent))
	}
	if c.Transport != TransportTCP && c.Transport != TransportBufconn {
		errs = append(errs, fmt.Errorf("unknown transport %q (want tcp or bufconn)", c.Transport))
	}
	return errors.Join(errs...)
}

// Topology is kas instances, agents serving the demo service, and the same service served directly.
type Topology struct {
	cfg TopologyConfig
	// Kas are the in-process kas instances; empty when the topology runs as processes.
	Kas     []*kas.Server
	Metrics []*metrics.Provider
	// Gatherers read each kas's metrics, in process or over HTTP.
	Gatherers []prometheus.Gatherer
	kas       []*topology.Kas
	agents    topology.Agents
	public    []*grpc.ClientConn
	// Direct is a connection to the demo service served without any tunnel, over the same transport.
	Direct       *grpc.ClientConn
	directServer *grpc.Server
	// HTTPUpstream is the base URL of a plain HTTP server that every agent forwards HTTP to; kas 0
	// serves HTTP for agents at HTTPTunnel.
	HTTPUpstream string
	HTTPTunnel   string
	httpServer   *http.Server
	httpUps      []*httptunnel.Upstream
	// procs, redis, scrapers and tempDir belong to a topology of processes.
	procs    []*proc.Proc
	redis    *proc.Redis
	scrapers []scrapeGatherer
	tempDir  string
}

// AgentToken is the token of agent id in harness topologies.
func AgentToken(id int64) string { return topology.AgentToken(id) }

// link is how agents and callers reach kas over transport.
func (t Transport) link() topology.Link {
	if t == TransportBufconn {
		return topology.InMemory
	}
	return topology.TCP
}

// StartTopology starts everything and waits until every agent has its idle tunnels.
func StartTopology(ctx context.Context, cfg TopologyConfig) (_ *Topology, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Target != "" {
		return targetTopology(cfg)
	}
	if cfg.Processes {
		return startProcessTopology(ctx, cfg)
	}
	t := &Topology{cfg: cfg}
	defer func() {
		if err != nil {
			t.Close(context.Background())
		}
	}()
	if err := t.startKas(); err != nil {
		return nil, err
	}
	if err := t.startDirect(); err != nil {
		return nil, err
	}
	if err := t.startHTTPUpstream(); err != nil {
		return nil, err
	}
	t.HTTPTunnel = "http://" + t.Kas[0].Addrs().HTTP.String()
	if t.agents, err = topology.StartAgents(ctx, cfg.Agents, t.agentConfig); err != nil {
		return nil, err
	}
	want := int64(cfg.Agents * cfg.TunnelsPerAgent)
	if cfg.SingleUseAgent {
		ac, err := t.agentConfig(t.SingleUseAgentID())
		if err != nil {
			return nil, err
		}
		ac.MinIdle = tunclient.DefaultMinIdleSingleUse
		ac.Adjust = func(c *tunclient.Config) { c.SingleUse = true }
		a, err := topology.StartAgent(ac)
		if err != nil {
			return nil, err
		}
		t.agents = append(t.agents, a)
		want += int64(ac.MinIdle)
	}
	if err := topology.WaitIdle(ctx, topology.DefaultConnectTimeout, want, func() int64 { return t.Kas[0].Registry().Stats().IdleTunnels }); err != nil {
		return nil, err
	}
	return t, nil
}

// startKas starts cfg.Kas kas instances. Several share an in-memory tracker and reach each other's
// private APIs on loopback.
func (t *Topology) startKas() error {
	auth, err := topology.AgentTokens(t.cfg.Agents+1, AgentToken) // +1: the single-use agent
	if err != nil {
		return err
	}
	kc := topology.KasConfig{
		Link:             t.cfg.Transport.link(),
		Auth:             auth,
		HTTP:             true, // HTTP is measured over loopback TCP whatever the gRPC transport
		FindTimeout:      t.cfg.FindTimeout,
		MaxConnectionAge: t.cfg.MaxConnectionAge,
		MaxMessageSize:   t.cfg.MaxMessageSize,
	}
	if t.cfg.Kas > 1 {
		kc.Tracker = tracker.NewMemory(0)
		if kc.Secret, err = topology.NewSecret(); err != nil {
			return err
		}
	}
	for i := range t.cfg.Kas {
		kc.Index = i
		k, err := topology.StartKas(kc)
		if err != nil {
			return err
		}
		t.kas = append(t.kas, k)
		t.Kas = append(t.Kas, k.Server)
		t.Metrics = append(t.Metrics, k.Metrics)
		t.Gatherers = append(t.Gatherers, k.Metrics.Registry())
		pub, err := k.DialAPI(topology.MaxMessageSize(t.cfg.MaxMessageSize))
		if err != nil {
			return err
		}
		t.public = append(t.public, pub)
	}
	return nil
}

// dialCaller connects a caller to the named target.
func dialCaller(target string, maxMsg int) (*grpc.ClientConn, error) {
	return topology.Dial(topology.Route{Target: target}, topology.MaxMessageSize(maxMsg))
}

func (t *Topology) startDirect() error {
	t.directServer = grpc.NewServer(grpc.MaxRecvMsgSize(t.cfg.MaxMessageSize), grpc.MaxSendMsgSize(t.cfg.MaxMessageSize))
	demo.Register(t.directServer)
	l, route, err := t.cfg.Transport.link().Listen(topology.Hop{Kind: topology.CallerDirect})
	if err != nil {
		return err
	}
	go func() { _ = t.directServer.Serve(l) }()
	t.Direct, err = topology.Dial(route, topology.MaxMessageSize(t.cfg.MaxMessageSize))
	return err
}

// agentConfig is agent id: on kas 0, serving the demo service and HTTP to the topology's upstream.
func (t *Topology) agentConfig(id int64) (topology.AgentConfig, error) {
	route, err := t.kas[0].AgentRoute(id)
	return topology.AgentConfig{
		ID:             id,
		Route:          route,
		MinIdle:        t.cfg.TunnelsPerAgent,
		MaxMessageSize: t.cfg.MaxMessageSize,
		Register: func(a *tunclient.Agent) error {
			demo.Register(a)
			up, err := url.Parse(t.HTTPUpstream)
			if err != nil {
				return err
			}
			hu, err := httptunnel.Register(a, up)
			if err == nil {
				t.httpUps = append(t.httpUps, hu)
			}
			return err
		},
	}, err
}

// SingleUseAgentID is the id of the agent with single-use tunnels (TopologyConfig.SingleUseAgent).
func (t *Topology) SingleUseAgentID() int64 { return int64(t.cfg.Agents) + 1 }

// Tunnel is a connection that reaches agents through kas i: in process (internal API) or over the
// public API.
func (t *Topology) Tunnel(i int, public bool) grpc.ClientConnInterface {
	if public {
		return t.public[i]
	}
	return t.Kas[i].InternalConn()
}

// PathConn is the connection a path's calls use. Agents connect to kas 0; the two-hop path's caller
// sits at kas 1: inside it when kas runs in process, at its public API when it runs as a process.
func (t *Topology) PathConn(p Path) (grpc.ClientConnInterface, error) {
	inProcess := len(t.Kas) > 0
	switch p {
	case PathDirect:
		if t.Direct == nil {
			return nil, fmt.Errorf("no direct baseline in this topology (give --target-direct)")
		}
		return t.Direct, nil
	case PathTunnelPublic:
		return t.public[0], nil
	case PathTunnel, PathTunnelSingleUse:
		if !inProcess {
			return nil, fmt.Errorf("path %s needs kas in this process; with --processes use tunnel-public", p)
		}
		return t.Kas[0].InternalConn(), nil
	case PathTunnel2Hop:
		if len(t.public) < 2 {
			return nil, fmt.Errorf("path %s needs two kas", p)
		}
		if inProcess {
			return t.Kas[1].InternalConn(), nil
		}
		return t.public[1], nil
	}
	return nil, fmt.Errorf("path %s is not available in this topology", p)
}

// Close stops agents, kas instances and the direct server. ctx bounds the graceful part.
func (t *Topology) Close(ctx context.Context) {
	t.agents.Stop(ctx)
	for _, c := range t.public {
		_ = c.Close()
	}
	for _, k := range t.kas {
		k.Shutdown(ctx)
	}
	if t.Direct != nil {
		_ = t.Direct.Close()
	}
	if t.directServer != nil {
		t.directServer.Stop()
	}
	for _, u := range t.httpUps {
		u.Close()
	}
	// Agents first, so that calls in flight end before their kas go; Redis last.
	for i := len(t.procs) - 1; i >= 0; i-- {
		_ = t.procs[i].Stop(15 * time.Second)
	}
	if t.redis != nil {
		_ = t.redis.Close()
	}
	if t.tempDir != "" {
		_ = os.RemoveAll(t.tempDir)
	}
	if t.httpServer != nil {
		_ = t.httpServer.Close()
	}
}

// HTTPPayload is the size of the body the topology's HTTP upstream answers /payload with.
const HTTPPayload = 1 << 10

// startHTTPUpstream serves /payload (HTTPPayload bytes) on loopback: what the HTTP cases fetch, directly,
// through the tunnel and through the reference's proxies.
func (t *Topology) startHTTPUpstream() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	body := make([]byte, HTTPPayload)
	mux := http.NewServeMux()
	mux.HandleFunc("/payload", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(body)
	})
	t.httpServer = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.httpServer.Serve(l) }()
	t.HTTPUpstream = "http://" + l.Addr().String()
	return nil
}

// targetTopology is an existing deployment: nothing is started, calls go to its public API, with TLS
// and a caller token when TargetSecurity says so.
func targetTopology(cfg TopologyConfig) (*Topology, error) {
	t := &Topology{cfg: cfg}
	secure, err := cfg.TargetSecurity.dialOptions()
	if err != nil {
		return nil, err
	}
	pub, err := topology.Dial(topology.Route{Target: cfg.Target}, append([]grpc.DialOption{topology.MaxMessageSize(cfg.MaxMessageSize)}, secure...)...)
	if err != nil {
		return nil, fmt.Errorf("--target %s: %w", cfg.Target, err)
	}
	t.public = []*grpc.ClientConn{pub}
	if cfg.TargetDirect != "" {
		if t.Direct, err = dialCaller(cfg.TargetDirect, cfg.MaxMessageSize); err != nil {
			t.Close(context.Background())
			return nil, fmt.Errorf("--target-direct %s: %w", cfg.TargetDirect, err)
		}
	}
	if cfg.TargetMetrics != "" {
		client := &http.Client{Timeout: 5 * time.Second}
		if tc, _ := cfg.TargetSecurity.tlsConfig(); tc != nil {
			// kas --tls-metrics serves the same certificate as its API. Scrapes are a few per case: no
			// idle connection is kept, so none outlives the run.
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig, tr.DisableKeepAlives = tc, true
			client.Transport = tr
		}
		t.Gatherers = []prometheus.Gatherer{scrapeGatherer{url: cfg.TargetMetrics, client: client}}
	}
	return t, nil
}
