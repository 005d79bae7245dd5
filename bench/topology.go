package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/tunnelbench/tunnelbench/internal/poll"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
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
	DefaultTunnelsPerAgent = 2
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
	agents    []*topoAgent
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
	// children, scrapers and tempDir belong to a topology of processes.
	children  []*child
	scrapers  []scrapeGatherer
	tempDir   string
	agentDial []func(context.Context, string) (net.Conn, error)
	agentAddr []string
}

type topoAgent struct {
	id    int64
	conn  *grpc.ClientConn
	agent *tunclient.Agent
}

// AgentToken is the token of agent id in harness topologies.
func AgentToken(id int64) string { return fmt.Sprintf("bench-agent-%d", id) }

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
	tokens := make(map[string]int64, cfg.Agents)
	for id := int64(1); id <= int64(cfg.Agents); id++ {
		tokens[AgentToken(id)] = id
	}
	auth, err := auth.NewStaticTokens(tokens)
	if err != nil {
		return nil, err
	}
	// Several kas share an in-memory tracker and reach each other's private APIs on loopback.
	var (
		tr     tracker.Tracker
		secret []byte
	)
	if cfg.Kas > 1 {
		tr = tracker.NewMemory(0)
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
	}
	for range cfg.Kas {
		mp, err := metrics.New()
		if err != nil {
			return nil, err
		}
		kc := kas.Config{
			Dev:              true, // loopback and in-memory listeners only
			Authenticator:    auth,
			FindTimeout:      cfg.FindTimeout,
			MaxConnectionAge: cfg.MaxConnectionAge,
			MaxMessageSize:   cfg.MaxMessageSize,
			Metrics:          mp,
			Tracker:          tr,
			PrivateAPISecret: secret,
		}
		if tr != nil {
			kc.PrivateListen = "127.0.0.1:0"
		}
		var apiDial func(context.Context, string) (net.Conn, error)
		kc.HTTPListen = "127.0.0.1:0" // HTTP is measured over loopback TCP whatever the gRPC transport
		switch cfg.Transport {
		case TransportTCP:
			kc.AgentListen, kc.APIListen = "127.0.0.1:0", "127.0.0.1:0"
		case TransportBufconn:
			al, pl := grpctool.NewInMemoryListener(), grpctool.NewInMemoryListener()
			kc.AgentListener, kc.APIListener = al, pl
			t.agentDial = append(t.agentDial, func(ctx context.Context, _ string) (net.Conn, error) { return al.DialContext(ctx) })
			apiDial = func(ctx context.Context, _ string) (net.Conn, error) { return pl.DialContext(ctx) }
		}
		k, err := kas.New(kc)
		if err != nil {
			return nil, err
		}
		if err := k.Start(); err != nil {
			return nil, err
		}
		t.Kas = append(t.Kas, k)
		t.Metrics = append(t.Metrics, mp)
		t.Gatherers = append(t.Gatherers, mp.Registry())
		pub, err := dialCaller(k.Addrs().API, apiDial, cfg.MaxMessageSize)
		if err != nil {
			return nil, err
		}
		t.public = append(t.public, pub)
		if cfg.Transport == TransportTCP {
			t.agentAddr = append(t.agentAddr, k.Addrs().Agent.String())
		}
	}
	if err := t.startDirect(); err != nil {
		return nil, err
	}
	if err := t.startHTTPUpstream(); err != nil {
		return nil, err
	}
	t.HTTPTunnel = "http://" + t.Kas[0].Addrs().HTTP.String()
	for id := int64(1); id <= int64(cfg.Agents); id++ {
		if err := t.startAgent(id, 0); err != nil {
			return nil, err
		}
	}
	want := int64(cfg.Agents * cfg.TunnelsPerAgent)
	if err := waitFor(ctx, 2*time.Minute, func() bool { return t.Kas[0].Registry().Stats().IdleTunnels >= want }); err != nil {
		return nil, fmt.Errorf("agents did not connect: %d of %d idle tunnels: %w", t.Kas[0].Registry().Stats().IdleTunnels, want, err)
	}
	return t, nil
}

// dialCaller connects a caller: through dial (in memory), to addr, or to the named target.
func dialCaller(addr net.Addr, dial func(context.Context, string) (net.Conn, error), maxMsg int, target ...string) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
	}
	switch {
	case dial != nil:
		return grpc.NewClient("passthrough:in-memory", append(opts, grpc.WithContextDialer(dial))...)
	case addr != nil:
		return grpc.NewClient(addr.String(), opts...)
	default:
		return grpc.NewClient(target[0], opts...)
	}
}

func (t *Topology) startDirect() error {
	t.directServer = grpc.NewServer(grpc.MaxRecvMsgSize(t.cfg.MaxMessageSize), grpc.MaxSendMsgSize(t.cfg.MaxMessageSize))
	demo.Register(t.directServer)
	var (
		l    net.Listener
		dial func(context.Context, string) (net.Conn, error)
	)
	switch t.cfg.Transport {
	case TransportBufconn:
		ml := grpctool.NewInMemoryListener()
		l, dial = ml, func(ctx context.Context, _ string) (net.Conn, error) { return ml.DialContext(ctx) }
	default:
		var err error
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
	}
	go func() { _ = t.directServer.Serve(l) }()
	conn, err := dialCaller(l.Addr(), dial, t.cfg.MaxMessageSize)
	if err != nil {
		return err
	}
	t.Direct = conn
	return nil
}

func (t *Topology) startAgent(id int64, kasIndex int) error {
	var opts []grpc.DialOption
	target := "passthrough:in-memory"
	if t.cfg.Transport == TransportBufconn {
		opts = append(opts, grpc.WithContextDialer(t.agentDial[kasIndex]))
	} else {
		target = t.agentAddr[kasIndex]
	}
	conn, err := tunclient.DialKas(target, AgentToken(id), opts...)
	if err != nil {
		return err
	}
	a, err := tunclient.New(tunclient.Config{
		KasConn:        conn,
		MinIdle:        t.cfg.TunnelsPerAgent,
		MaxConnections: max(tunclient.DefaultMaxConnections, t.cfg.TunnelsPerAgent),
		MaxMessageSize: t.cfg.MaxMessageSize,
	})
	if err != nil {
		_ = conn.Close()
		return err
	}
	demo.Register(a)
	up, err := url.Parse(t.HTTPUpstream)
	if err == nil {
		var hu *httptunnel.Upstream
		if hu, err = httptunnel.Register(a, up); err == nil {
			t.httpUps = append(t.httpUps, hu)
		}
	}
	if err != nil {
		a.Stop(context.Background())
		_ = conn.Close()
		return err
	}
	if err := a.Start(); err != nil {
		a.Stop(context.Background())
		_ = conn.Close()
		return err
	}
	t.agents = append(t.agents, &topoAgent{id: id, conn: conn, agent: a})
	return nil
}

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
	case PathTunnel:
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
	for _, a := range t.agents {
		a.agent.Stop(ctx)
		_ = a.conn.Close()
	}
	for _, c := range t.public {
		_ = c.Close()
	}
	for _, k := range t.Kas {
		k.Shutdown(ctx)
	}
	for _, mp := range t.Metrics {
		_ = mp.Shutdown(context.Background())
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
	// Agents first, so that calls in flight end before their kas go.
	for i := len(t.children) - 1; i >= 0; i-- {
		t.children[i].stop(15 * time.Second)
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

// startHTTPUpstream serves /payload (HTTPPayload bytes) on loopback: what the HTTP cases fetch, directly
// and through the tunnel.
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

func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	return poll.Until(ctx, timeout, 5*time.Millisecond, cond)
}

// targetTopology is an existing deployment: nothing is started, calls go to its public API.
func targetTopology(cfg TopologyConfig) (*Topology, error) {
	t := &Topology{cfg: cfg}
	pub, err := dialCaller(nil, nil, cfg.MaxMessageSize, cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("--target %s: %w", cfg.Target, err)
	}
	t.public = []*grpc.ClientConn{pub}
	if cfg.TargetDirect != "" {
		if t.Direct, err = dialCaller(nil, nil, cfg.MaxMessageSize, cfg.TargetDirect); err != nil {
			t.Close(context.Background())
			return nil, fmt.Errorf("--target-direct %s: %w", cfg.TargetDirect, err)
		}
	}
	if cfg.TargetMetrics != "" {
		t.Gatherers = []prometheus.Gatherer{scrapeGatherer{url: cfg.TargetMetrics, client: &http.Client{Timeout: 5 * time.Second}}}
	}
	return t, nil
}
