// Package kas assembles a kas server from the tunnel core: the agent API, the public and internal gRPC
// APIs that route calls, the private API for other kas instances, metrics and health endpoints, and a
// graceful shutdown.
//
// It is what cmd/kas runs and what the harness embeds; it holds no routing logic of its own.
package kas

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
)

// Defaults.
const (
	DefaultAgentListen   = "127.0.0.1:8150"
	DefaultMetricsListen = "127.0.0.1:8151"
	DefaultAPIListen     = "127.0.0.1:8153"
	DefaultPrivateListen = "127.0.0.1:8155"
	// DefaultMaxConnectionAge is how long an agent connection may live before kas rotates it.
	DefaultMaxConnectionAge = 30 * time.Minute
	// DefaultShutdownGrace is how long calls in flight may run after shutdown begins.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultMaxMessageSize is the largest message kas routes.
	DefaultMaxMessageSize = 4 << 20
	// envelopeOverhead is room for the protocol envelope around a routed message.
	envelopeOverhead = 64 << 10
	// agentKeepaliveTime: kas pings an agent connection that was quiet this long, so that a vanished
	// agent (a black hole, not a closed socket) is noticed.
	agentKeepaliveTime    = 20 * time.Second
	agentKeepaliveTimeout = 10 * time.Second
	// AgentMinPingInterval is the most often an agent may ping kas.
	AgentMinPingInterval = 5 * time.Second
)

// Config configures a kas. For each listener, a ready net.Listener wins over its address; an empty
// address with no listener disables that listener (the agent API is always on).
type Config struct {
	AgentListen   string
	APIListen     string
	PrivateListen string
	MetricsListen string
	// HTTPListen serves HTTP for agents: /agents/{id}/{path} goes to that agent's --http-upstream.
	HTTPListen string

	AgentListener   net.Listener
	APIListener     net.Listener
	PrivateListener net.Listener
	MetricsListener net.Listener
	HTTPListener    net.Listener

	// Authenticator maps agent tokens to agent ids. Required.
	Authenticator tunserver.AgentAuthenticator
	// FindTimeout bounds how long a call waits for a tunnel. Zero means tunserver.DefaultFindTimeout.
	FindTimeout time.Duration
	// MaxConnectionAge rotates agent connections. Zero means DefaultMaxConnectionAge; negative disables.
	MaxConnectionAge time.Duration
	// ShutdownGrace bounds how long calls in flight may run after Shutdown begins.
	ShutdownGrace time.Duration
	// MaxMessageSize is the largest request or response message routed.
	MaxMessageSize int

	// Tracker lists which kas holds tunnels for which agent, for several kas replicas. Nil: this kas is
	// alone and routes only to its own tunnels. With a tracker, the private API must listen and
	// PrivateAPISecret must be set.
	Tracker tracker.Tracker
	// Redis, when set and Tracker is nil, makes kas use (and close) a Redis tracker.
	Redis *tracker.RedisConfig
	// PrivateURL is how other kas reach this one ("grpc://host:port"). Empty: derived from the private
	// listener's address.
	PrivateURL string
	// PrivateAPISecret is shared by every kas of a deployment; it signs private API tokens. Without it
	// the private API listener refuses every call.
	PrivateAPISecret []byte
	// TrackerRefresh is how often this kas refreshes its tracker records (below the tracker's TTL).
	// Zero means tracker.DefaultRefreshPeriod.
	TrackerRefresh time.Duration
	// UnregisterDelay: see DefaultUnregisterDelay. Zero means the default.
	UnregisterDelay time.Duration

	// TLS, when set, serves every listener over TLS (the metrics listener only with TLS.Metrics).
	TLS *TLSConfig
	// Callers authorizes callers of the public API and the HTTP listener by bearer token. Nil requires
	// Dev.
	Callers tunserver.CallerAuthorizer
	// Dev serves the public API and the HTTP listener without caller authentication. It is refused
	// unless those listeners are on loopback.
	Dev bool
	// Limits bound what one agent or caller can make kas do; see DefaultLimits.
	Limits Limits

	// Tracer records routing spans; nil records none (trace context still reaches agents).
	Tracer trace.Tracer
	// OTLPEndpoint is used by Main to make Tracer (see tracing.Provider).
	OTLPEndpoint string

	// Metrics is where kas records its metrics. Nil creates a provider with Go runtime metrics.
	Metrics *metrics.Provider
	Log     *slog.Logger
}

// TLSConfig is kas's TLS: one certificate for every listener, reloaded when its files change.
type TLSConfig struct {
	CertFile, KeyFile string
	// AgentCAFile, when set, requires agents to present a client certificate signed by it (mutual TLS).
	AgentCAFile string
	// PeerCAFile verifies other kas instances' certificates on the private API; empty: the system roots.
	PeerCAFile string
	// Metrics serves /metrics, /healthz and /readyz over TLS too.
	Metrics bool
}

func (c *Config) validate() error {
	var errs []error
	if c.Authenticator == nil {
		errs = append(errs, errors.New("an agent authenticator is required (agent tokens)"))
	}
	if c.AgentListen == "" && c.AgentListener == nil {
		errs = append(errs, errors.New("the agent API needs a listen address"))
	}
	if c.FindTimeout < 0 {
		errs = append(errs, fmt.Errorf("tunnel find timeout must be positive, got %s", c.FindTimeout))
	}
	if c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("shutdown grace must not be negative, got %s", c.ShutdownGrace))
	}
	if c.MaxMessageSize < 0 {
		errs = append(errs, fmt.Errorf("max message size must be positive, got %d", c.MaxMessageSize))
	}
	if c.Redis != nil && c.Tracker == nil {
		if err := c.Redis.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Tracker != nil || c.Redis != nil {
		if c.PrivateListen == "" && c.PrivateListener == nil {
			errs = append(errs, errors.New("several kas replicas (a tracker) need the private API listener"))
		}
		if len(c.PrivateAPISecret) == 0 {
			errs = append(errs, errors.New("several kas replicas (a tracker) need the private API secret"))
		}
	}
	if len(c.PrivateAPISecret) > 0 && len(c.PrivateAPISecret) < tunserver.MinPrivateSecretLen {
		errs = append(errs, fmt.Errorf("the private API secret must be at least %d bytes, got %d", tunserver.MinPrivateSecretLen, len(c.PrivateAPISecret)))
	}
	if c.PrivateURL != "" {
		if _, _, err := tunserver.ParsePrivateURL(c.PrivateURL); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Callers == nil && !c.Dev && (c.APIListen != "" || c.APIListener != nil || c.HTTPListen != "" || c.HTTPListener != nil) {
		errs = append(errs, errors.New("the public API and the HTTP listener need caller tokens (or, on loopback only, dev mode)"))
	}
	if c.Dev && c.Callers == nil {
		for _, a := range []string{c.APIListen, c.HTTPListen, listenerAddr(c.APIListener), listenerAddr(c.HTTPListener)} {
			if a != "" && !isLoopback(a) {
				errs = append(errs, fmt.Errorf("dev mode (no caller authentication) is for loopback only, not %s", a))
			}
		}
	}
	if c.TLS != nil && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("TLS needs a certificate file and a key file"))
	}
	if l := c.Limits; l.MaxTunnelsPerAgent < 0 || l.MaxWaitingPerAgent < 0 || l.TunnelRate < 0 || l.TunnelBurst < 0 || l.MaxHTTPBody < 0 || l.MaxDescriptorBytes < 0 || l.MaxHTTPHeaderBytes < 0 || l.HTTPReadHeaderTimeout < 0 ||
		l.MaxWaiting < 0 || l.MaxWaitingPerCaller < 0 || l.MaxMetadataBytes < 0 || l.TunnelHandshakeTimeout < 0 || l.MaxConnections < 0 || l.IdleConnectionTimeout < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	if m, msg := c.Limits.MaxMetadataBytes, cmp.Or(c.MaxMessageSize, DefaultMaxMessageSize); m > msg {
		errs = append(errs, fmt.Errorf("the metadata limit (%d bytes) must not be larger than the message limit (%d bytes): a call's metadata travels to the agent in one tunnel message", m, msg))
	}
	if c.TrackerRefresh < 0 || c.UnregisterDelay < 0 {
		errs = append(errs, errors.New("tracker refresh and unregister delay must not be negative"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("kas config: %w", errors.Join(errs...))
	}
	l, d := &c.Limits, DefaultLimits
	if l.TunnelRate == 0 {
		l.TunnelRate, l.TunnelBurst = d.TunnelRate, max(l.TunnelBurst, d.TunnelBurst)
	}
	l.MaxTunnelsPerAgent = cmp.Or(l.MaxTunnelsPerAgent, d.MaxTunnelsPerAgent)
	l.MaxWaitingPerAgent = cmp.Or(l.MaxWaitingPerAgent, d.MaxWaitingPerAgent)
	l.MaxWaiting = cmp.Or(l.MaxWaiting, d.MaxWaiting)
	l.MaxWaitingPerCaller = cmp.Or(l.MaxWaitingPerCaller, d.MaxWaitingPerCaller)
	l.MaxMetadataBytes = cmp.Or(l.MaxMetadataBytes, min(d.MaxMetadataBytes, cmp.Or(c.MaxMessageSize, DefaultMaxMessageSize)))
	l.TunnelHandshakeTimeout = cmp.Or(l.TunnelHandshakeTimeout, d.TunnelHandshakeTimeout)
	l.MaxConnections = cmp.Or(l.MaxConnections, d.MaxConnections)
	l.IdleConnectionTimeout = cmp.Or(l.IdleConnectionTimeout, d.IdleConnectionTimeout)
	l.TunnelBurst = cmp.Or(l.TunnelBurst, d.TunnelBurst)
	l.MaxHTTPBody = cmp.Or(l.MaxHTTPBody, d.MaxHTTPBody)
	l.MaxDescriptorBytes = cmp.Or(l.MaxDescriptorBytes, d.MaxDescriptorBytes)
	l.MaxHTTPHeaderBytes = cmp.Or(l.MaxHTTPHeaderBytes, d.MaxHTTPHeaderBytes)
	l.HTTPReadHeaderTimeout = cmp.Or(l.HTTPReadHeaderTimeout, d.HTTPReadHeaderTimeout)
	if c.TrackerRefresh == 0 {
		c.TrackerRefresh = tracker.DefaultRefreshPeriod
		if c.Redis != nil {
			c.TrackerRefresh = c.Redis.WithDefaults().RefreshPeriod
		}
	}
	if c.UnregisterDelay == 0 {
		c.UnregisterDelay = DefaultUnregisterDelay
	}
	if c.FindTimeout == 0 {
		c.FindTimeout = tunserver.DefaultFindTimeout
	}
	if c.MaxConnectionAge == 0 {
		c.MaxConnectionAge = DefaultMaxConnectionAge
	}
	if c.MaxConnectionAge < 0 {
		c.MaxConnectionAge = 0
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Server is one kas.
type Server struct {
	cfg      Config
	metrics  *metrics.Provider
	ownsMP   bool
	registry *tunserver.Registry
	router   *tunserver.Router
	finder   *tunserver.Finder
	gateways *tunserver.GatewayPool
	reg      *registrar
	meter    metric.Meter
	// ownedTracker is the Redis tracker kas made from Config.Redis, closed at shutdown.
	ownedTracker interface{ Close() error }

	agentServer   *grpc.Server
	apiServer     *grpc.Server
	privateServer *grpc.Server
	httpServer    *http.Server
	httpTunnel    *http.Server

	// internalConn is how callers in this process reach the router: in process, without HTTP/2.
	internalConn *grpctool.InProcessConn

	listeners struct {
		agent, api, private, metrics, http net.Listener
	}
	// certs serves the TLS certificate, reloaded when its files change; nil for plaintext.
	certs     *tlsfiles.Reloader
	limitHits metric.Int64Counter
	ready     atomic.Bool
	serveWG   sync.WaitGroup
	shutOnce  sync.Once
}

// New builds a kas; Start opens its listeners.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, metrics: cfg.Metrics}
	if cfg.Tracker == nil && cfg.Redis != nil {
		// go-redis logs every failed dial itself; route those lines to debug so that an outage is logged at
		// a bounded rate (by the registrar) rather than once per attempt.
		tracker.SetRedisLogger(cfg.Log)
		r, err := tracker.NewRedis(*cfg.Redis)
		if err != nil {
			return nil, fmt.Errorf("redis tracker: %w", err)
		}
		s.ownedTracker = r
		cfg.Tracker = r
		s.cfg.Tracker = r
	}
	if s.metrics == nil {
		mp, err := metrics.New(metrics.WithRuntimeMetrics())
		if err != nil {
			return nil, err
		}
		s.metrics, s.ownsMP = mp, true
	}
	meter := s.metrics.Meter("github.com/tunnelbench/tunnelbench/core/kas")
	grpcMetrics, err := metrics.GRPCServer(s.metrics)
	if err != nil {
		return nil, err
	}
	s.registry = tunserver.NewRegistry(cfg.Log, 0)
	if err := tunserver.RegisterRegistryMetrics(meter, s.registry); err != nil {
		return nil, fmt.Errorf("registry metrics: %w", err)
	}
	if s.limitHits, err = meter.Int64Counter(LimitRejectionsMetric, metric.WithDescription("Requests refused because a limit bit, by limit")); err != nil {
		return nil, err
	}
	for _, l := range limitNames {
		s.limitHits.Add(context.Background(), 0, metric.WithAttributes(attribute.String("limit", l)))
	}
	s.registry.SetLimits(tunserver.RegistryLimits{
		MaxTunnelsPerAgent: cfg.Limits.MaxTunnelsPerAgent,
		MaxWaitingPerAgent: cfg.Limits.MaxWaitingPerAgent,
		MaxWaiting:         cfg.Limits.MaxWaiting,
	}, s.limitHit)
	var agentCreds, serverCreds, peerCreds credentials.TransportCredentials
	if cfg.TLS != nil {
		if s.certs, err = tlsfiles.NewReloader(cfg.TLS.CertFile, cfg.TLS.KeyFile); err != nil {
			return nil, err
		}
		var agentCAs, peerCAs *x509.CertPool
		if cfg.TLS.AgentCAFile != "" {
			if agentCAs, err = tlsfiles.CertPool(cfg.TLS.AgentCAFile); err != nil {
				return nil, fmt.Errorf("agent CA: %w", err)
			}
		}
		if cfg.TLS.PeerCAFile != "" {
			if peerCAs, err = tlsfiles.CertPool(cfg.TLS.PeerCAFile); err != nil {
				return nil, fmt.Errorf("peer CA: %w", err)
			}
		}
		agentCreds = credentials.NewTLS(tlsfiles.Server(s.certs, agentCAs))
		serverCreds = credentials.NewTLS(tlsfiles.Server(s.certs, nil))
		peerCreds = credentials.NewTLS(tlsfiles.Client(peerCAs, "", nil))
	}
	withCreds := func(c credentials.TransportCredentials, opts []grpc.ServerOption) []grpc.ServerOption {
		if c == nil {
			return opts
		}
		return append(opts, grpc.Creds(c))
	}

	routedMax := cfg.MaxMessageSize
	envelopeMax := cfg.MaxMessageSize + envelopeOverhead
	agentOpts := []grpc.ServerOption{
		grpctool.RawServerCodec(),
		grpc.MaxRecvMsgSize(envelopeMax),
		grpc.MaxSendMsgSize(envelopeMax),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: AgentMinPingInterval, PermitWithoutStream: true}),
		grpc.KeepaliveParams(agentKeepalive(cfg.MaxConnectionAge, cfg.Limits.IdleConnectionTimeout)),
		// Thousands of mostly idle agent connections: no write buffer held per idle connection.
		grpc.SharedWriteBuffer(true),
	}
	agentOpts = append(agentOpts, grpctool.WindowServerOptions()...)
	agentOpts = append(agentOpts, metrics.ServerOptions(grpcMetrics)...)
	s.agentServer = grpc.NewServer(withCreds(agentCreds, agentOpts)...)

	// Every method is routable, registered or not: the routing and gateway handlers are also the
	// servers' unknown service handlers. The servers exist before the router that needs them, hence the
	// indirection.
	var router *tunserver.Router
	route := func(srv any, stream grpc.ServerStream) error { return router.RouteStream(srv, stream) }
	gateway := func(srv any, stream grpc.ServerStream) error { return router.GatewayStreamHandler()(srv, stream) }
	routingServer := func() *grpc.Server {
		opts := append([]grpc.ServerOption{
			grpctool.RawServerCodec(),
			grpc.MaxRecvMsgSize(routedMax),
			grpc.MaxSendMsgSize(routedMax),
			grpc.UnknownServiceHandler(route),
			// A caller's connection that carries nothing goes away: it holds a place of --max-connections.
			grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: cfg.Limits.IdleConnectionTimeout}),
		}, metrics.RoutedServerOptions(grpcMetrics)...)
		opts = append(opts, grpc.ChainStreamInterceptor(messageSizeInterceptor(routedMax, s.limitHit)))
		if cfg.Callers != nil {
			opts = append(opts, grpc.ChainStreamInterceptor(tunserver.CallerAuthInterceptor(cfg.Callers)))
		}
		return grpc.NewServer(withCreds(serverCreds, opts)...)
	}
	s.internalConn = grpctool.NewInProcessConn(route)
	s.apiServer = routingServer()
	privateOpts := []grpc.ServerOption{
		grpctool.RawServerCodec(),
		grpc.MaxRecvMsgSize(envelopeMax),
		grpc.MaxSendMsgSize(envelopeMax),
		grpc.UnknownServiceHandler(gateway),
	}
	privateOpts = append(privateOpts, grpctool.WindowServerOptions()...)
	privateOpts = append(privateOpts, metrics.RoutedServerOptions(grpcMetrics)...)
	if len(cfg.PrivateAPISecret) > 0 {
		auth, err := tunserver.NewPrivateAuth(cfg.PrivateAPISecret)
		if err != nil {
			return nil, err
		}
		privateOpts = append(privateOpts, grpc.ChainStreamInterceptor(auth.StreamInterceptor()))
		s.gateways = tunserver.NewGatewayPool(auth, peerCreds, grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(envelopeMax), grpc.MaxCallSendMsgSize(envelopeMax)))
	} else {
		privateOpts = append(privateOpts, grpc.ChainStreamInterceptor(refuseAll))
	}
	s.privateServer = grpc.NewServer(withCreds(serverCreds, privateOpts)...)
	s.meter = meter
	var finderErrs func(error)
	if cfg.Tracker != nil {
		// The registrar exists before the finder so that tracker poll errors land in its metric.
		s.reg, err = newRegistrar(cfg.Tracker, "", cfg.UnregisterDelay, cfg.TrackerRefresh, cfg.Log, meter)
		if err != nil {
			return nil, err
		}
		s.registry.OnAgent(s.reg.onAgent)
		finderErrs = func(err error) { s.reg.failed("list", err) }
	}
	s.finder = tunserver.NewFinder(tunserver.FinderConfig{
		Registry:       s.registry,
		Tracker:        cfg.Tracker,
		Dialer:         s.gateways,
		Log:            cfg.Log,
		OnTrackerError: finderErrs,
	})
	router, err = tunserver.NewRouter(tunserver.RouterConfig{
		Registry:            s.registry,
		Finder:              s.finder,
		PrivateServer:       s.privateServer,
		FindTimeout:         cfg.FindTimeout,
		MaxMetadataBytes:    cfg.Limits.MaxMetadataBytes,
		MaxWaitingPerCaller: cfg.Limits.MaxWaitingPerCaller,
		Meter:               meter,
		Tracer:              cfg.Tracer,
		Log:                 cfg.Log,
	})
	if err != nil {
		return nil, err
	}
	s.router = router
	agentAPI, err := tunserver.NewAgentAPI(cfg.Authenticator, s.registry, cfg.MaxConnectionAge, cfg.Log)
	if err != nil {
		return nil, err
	}
	agentAPI.SetTunnelRate(cfg.Limits.TunnelRate, cfg.Limits.TunnelBurst)
	agentAPI.SetMaxDescriptorBytes(cfg.Limits.MaxDescriptorBytes)
	agentAPI.SetHandshakeTimeout(cfg.Limits.TunnelHandshakeTimeout)
	agentAPI.SetMaxSendBytes(envelopeMax)
	rpc.RegisterReverseTunnelServer(s.agentServer, agentAPI)
	return s, nil
}

// agentKeepalive rotates agent connections: GOAWAY at 20% of the max age (gRPC adds ±10%), then 65% of
// the age for calls in flight to finish. Idle tunnels end earlier, at their own deadline (see
// tunserver.TunnelDeadline), so rotation never breaks a call.
//
// A connection without any stream for idle is closed: an agent always keeps tunnels open, so only a
// client that never opened one (no token needed for that) is cut off.
func agentKeepalive(maxAge, idle time.Duration) keepalive.ServerParameters {
	kp := keepalive.ServerParameters{Time: agentKeepaliveTime, Timeout: agentKeepaliveTimeout, MaxConnectionIdle: idle}
	if maxAge > 0 {
		kp.MaxConnectionAge = maxAge * 20 / 100
		kp.MaxConnectionAgeGrace = maxAge * 65 / 100
	}
	return kp
}

// Start opens the listeners and serves. It returns once every listener accepts connections.
func (s *Server) Start() error {
	var err error
	listen := func(l net.Listener, addr string) net.Listener {
		if err != nil || l != nil || addr == "" {
			return l
		}
		var nl net.Listener
		nl, err = net.Listen("tcp", addr)
		if err != nil {
			err = fmt.Errorf("listen on %s: %w", addr, err)
		}
		return nl
	}
	s.listeners.agent = listen(s.cfg.AgentListener, s.cfg.AgentListen)
	s.listeners.api = listen(s.cfg.APIListener, s.cfg.APIListen)
	s.listeners.private = listen(s.cfg.PrivateListener, s.cfg.PrivateListen)
	s.listeners.metrics = listen(s.cfg.MetricsListener, s.cfg.MetricsListen)
	s.listeners.http = listen(s.cfg.HTTPListener, s.cfg.HTTPListen)
	if err != nil {
		s.closeListeners()
		return err
	}
	s.limitConnections()
	serve := func(srv *grpc.Server, l net.Listener) {
		if l == nil {
			return
		}
		s.serveWG.Add(1)
		go func() {
			defer s.serveWG.Done()
			_ = srv.Serve(l) // returns when the server stops
		}()
	}
	serve(s.agentServer, s.listeners.agent)
	serve(s.apiServer, s.listeners.api)
	serve(s.privateServer, s.listeners.private)
	if s.listeners.http != nil {
		guard := &httpGuard{
			next:      httptunnel.NewHandler(s.internalConn, httptunnel.WithLogger(s.cfg.Log)),
			callers:   s.cfg.Callers,
			maxBody:   s.cfg.Limits.MaxHTTPBody,
			maxHeader: s.cfg.Limits.MaxHTTPHeaderBytes,
			onLimit:   s.limitHit,
		}
		s.httpTunnel = httptunnel.NewServer(guard, s.listeners.http.Addr().String())
		s.httpTunnel.ReadHeaderTimeout = s.cfg.Limits.HTTPReadHeaderTimeout
		s.httpTunnel.IdleTimeout = s.cfg.Limits.IdleConnectionTimeout
		// Failed handshakes and malformed requests are the client's problem: debug, in kas's log format.
		s.httpTunnel.ErrorLog = slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelDebug)
		// The guard answers 431 and counts it; the server's own bound, past it, only stops a header too
		// large to read at all.
		s.httpTunnel.MaxHeaderBytes = 2 * s.cfg.Limits.MaxHTTPHeaderBytes
		l := s.listeners.http
		if s.certs != nil {
			s.httpTunnel.TLSConfig = tlsfiles.Server(s.certs, nil)
			s.httpTunnel.TLSConfig.NextProtos = []string{"h2", "http/1.1"}
			l = tls.NewListener(l, s.httpTunnel.TLSConfig)
		}
		s.serveWG.Add(1)
		go func() {
			defer s.serveWG.Done()
			_ = s.httpTunnel.Serve(l)
		}()
	}
	if s.listeners.metrics != nil {
		s.httpServer = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelDebug)}
		l := s.listeners.metrics
		if s.certs != nil && s.cfg.TLS.Metrics {
			l = tls.NewListener(l, tlsfiles.Server(s.certs, nil))
		}
		s.serveWG.Add(1)
		go func() {
			defer s.serveWG.Done()
			_ = s.httpServer.Serve(l)
		}()
	}
	if s.reg != nil {
		self := s.cfg.PrivateURL
		if self == "" {
			scheme := "grpc://"
			if s.certs != nil {
				scheme = "grpcs://"
			}
			self = scheme + s.listeners.private.Addr().String()
		}
		s.reg.url = self
		s.finder.SetSelfURL(self)
		s.reg.start()
	}
	s.ready.Store(true)
	s.cfg.Log.Info("kas started", "agent_api", addrOf(s.listeners.agent), "public_api", addrOf(s.listeners.api),
		"private_api", addrOf(s.listeners.private), "http", addrOf(s.listeners.http), "metrics", addrOf(s.listeners.metrics),
		"tls", s.certs != nil, "caller_auth", s.cfg.Callers != nil)
	if s.certs == nil {
		s.cfg.Log.Warn("listeners are plaintext: tokens cross the network in the clear; use --tls-cert-file and --tls-key-file beyond loopback")
	}
	if s.cfg.Callers == nil {
		s.cfg.Log.Warn("dev mode: the public API and the HTTP listener accept any caller (loopback only)")
	}
	return nil
}

// limitConnections caps every listener at MaxConnections open connections: connections cost kas
// goroutines and buffers before any token is checked, so an anonymous client must not open them
// without bound. Past the cap, new connections wait in the kernel's accept queue.
func (s *Server) limitConnections() {
	n := s.cfg.Limits.MaxConnections
	for _, l := range []*net.Listener{&s.listeners.agent, &s.listeners.api, &s.listeners.private, &s.listeners.metrics, &s.listeners.http} {
		if *l != nil {
			*l = newLimitListener(*l, n)
		}
	}
}

func (s *Server) closeListeners() {
	for _, l := range []net.Listener{s.listeners.agent, s.listeners.api, s.listeners.private, s.listeners.metrics, s.listeners.http} {
		if l != nil {
			_ = l.Close()
		}
	}
}

func addrOf(l net.Listener) string {
	if l == nil {
		return "off"
	}
	return l.Addr().String()
}

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}

// Addrs are the addresses kas listens on; nil for a listener that is off.
type Addrs struct {
	Agent, API, Private, Metrics, HTTP net.Addr
}

// Addrs returns the listening addresses, useful when listening on port 0.
func (s *Server) Addrs() Addrs {
	a := func(l net.Listener) net.Addr {
		if l == nil {
			return nil
		}
		return l.Addr()
	}
	return Addrs{Agent: a(s.listeners.agent), API: a(s.listeners.api), Private: a(s.listeners.private), Metrics: a(s.listeners.metrics), HTTP: a(s.listeners.http)}
}

// InternalConn is a connection to kas's internal API for callers in the same process: any method called
// on it with the kas-hop-routing-agent-id metadata is routed to that agent. It needs no closing.
func (s *Server) InternalConn() grpc.ClientConnInterface {
	return s.internalConn
}

// RegisterTunclientAPI registers an agent service's methods explicitly (they are routable anyway).
func (s *Server) RegisterTunclientAPI(desc *grpc.ServiceDesc) {
	s.router.RegisterTunclientAPI(desc)
}

// Registry is kas's tunnel registry.
func (s *Server) Registry() *tunserver.Registry {
	return s.registry
}

// Metrics is kas's metrics provider.
func (s *Server) Metrics() *metrics.Provider {
	return s.metrics
}

// Shutdown stops kas gracefully: readiness fails, waiting calls get Unavailable "kas is shutting down",
// idle tunnels end so their agents reconnect elsewhere (with jitter), and calls in flight get up to
// ShutdownGrace to finish before they are cut. ctx can shorten the grace. It returns when every server
// goroutine ended.
func (s *Server) Shutdown(ctx context.Context) {
	s.stop(ctx, false)
}

// Kill stops kas abruptly, as a crash would: every connection drops at once, no agent is told to
// reconnect elsewhere, calls in flight fail, and the tracker keeps this kas's records until they
// expire. The harness uses it to inject process faults.
func (s *Server) Kill() {
	s.stop(context.Background(), true)
}

func (s *Server) stop(ctx context.Context, kill bool) {
	s.shutOnce.Do(func() {
		s.ready.Store(false)
		if s.reg != nil && s.reg.cancel != nil {
			if kill {
				s.reg.cancel()
				<-s.reg.done
			} else {
				s.reg.stop(ctx)
			}
		}
		if kill {
			// Connections go before the registry learns anything: no tunnel gets a clean end.
			for _, srv := range []*grpc.Server{s.apiServer, s.agentServer, s.privateServer} {
				srv.Stop()
			}
			if s.httpTunnel != nil {
				_ = s.httpTunnel.Close()
			}
		}
		s.registry.Stop()
		graceCtx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownGrace)
		defer cancel()
		servers := []*grpc.Server{s.apiServer, s.agentServer, s.privateServer}
		var wg sync.WaitGroup
		if s.httpTunnel != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Requests in flight finish within the grace; then their connections are cut.
				if err := s.httpTunnel.Shutdown(graceCtx); err != nil {
					_ = s.httpTunnel.Close()
				}
			}()
		}
		for _, srv := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stopped := make(chan struct{})
				go func() {
					srv.GracefulStop()
					close(stopped)
				}()
				select {
				case <-stopped:
				case <-graceCtx.Done():
					srv.Stop()
					<-stopped
				}
			}()
		}
		wg.Wait()
		if s.httpServer != nil {
			_ = s.httpServer.Shutdown(graceCtx)
			_ = s.httpServer.Close()
		}
		s.serveWG.Wait()
		s.finder.Close()
		if s.gateways != nil {
			s.gateways.Close()
		}
		if s.ownedTracker != nil {
			_ = s.ownedTracker.Close()
		}
		// In-process calls end with the tunnels they use: the registry stopped and the agent server ended
		// every stream. Bound the wait anyway, so that shutdown never hangs on a handler.
		internalDone := make(chan struct{})
		go func() {
			s.internalConn.Wait()
			close(internalDone)
		}()
		select {
		case <-internalDone:
		case <-time.After(5 * time.Second):
			s.cfg.Log.Error("in-process calls still running 5s after shutdown")
		}
		if s.ownsMP {
			_ = s.metrics.Shutdown(context.Background())
		}
		s.cfg.Log.Info("kas stopped")
	})
}

// refuseAll guards a private API that has no secret: without one no token can be checked.
func refuseAll(any, grpc.ServerStream, *grpc.StreamServerInfo, grpc.StreamHandler) error {
	return status.Error(codes.Unauthenticated, "private API: this kas has no private API secret configured")
}

// listenerAddr is a TCP listener's address, to check that dev mode stays on loopback; other listeners
// (in-memory, Unix sockets) are not reachable from the network, and give "".
func listenerAddr(l net.Listener) string {
	if l == nil {
		return ""
	}
	if a, ok := l.Addr().(*net.TCPAddr); ok {
		return a.String()
	}
	return ""
}

// isLoopback reports whether a listen address (host:port) is on a loopback interface only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
