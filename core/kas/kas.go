// Package kas assembles a kas server from the tunnel core: the agent API, the public API and in-process
// callers that route calls, the private API for other kas instances, the HTTP listener, metrics and
// health endpoints, and the graceful and abrupt stops. Each listener is built in a file of its own; the
// limits it puts on agents and callers, and their checks at its listeners, are package limits.
//
// It is what cmd/kas runs and what the harness embeds; it holds no routing logic of its own.
package kas

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/tunnelbench/tunnelbench/core/tunserver/directory"

	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/grpctool/pingack"
	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunserver/gateway"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing"
)

// Server is one kas.
type Server struct {
	cfg      Config
	metrics  *metrics.Provider
	ownsMP   bool
	registry *registry.Registry
	finder   *routing.Finder
	gateways *routing.GatewayPool
	// dir publishes this kas's agents in the tracker and watches the others'; nil without a tracker.
	dir *directory.Directory
	// ownedTracker is the Redis tracker kas made from Config.Redis, closed at shutdown.
	ownedTracker interface{ Close() error }

	agentServer   *grpc.Server
	apiServer     *grpc.Server
	privateServer *grpc.Server
	// gateway serves the private API; nil when it does not listen.
	gateway    *gateway.Handler
	httpServer *http.Server
	httpTunnel *http.Server

	// pingAcks counts the public API's held PING ACKs (PublicPingAcksMetric).
	pingAcks pingack.Counts

	// internalConn is how callers in this process reach the router: in process, without HTTP/2, through
	// the same limits and metrics as the public API.
	internalConn *grpctool.InProcessConn

	listeners struct {
		agent, api, private, metrics, http net.Listener
	}
	// certs serves the TLS certificate, reloaded when its files change; nil for plaintext.
	certs *tlsfiles.Reloader
	// rejections counts what every limit refused.
	rejections *limits.Rejections
	ready      atomic.Bool
	serveWG    sync.WaitGroup
	shutOnce   sync.Once
}

// New builds a kas, its parts in the order they depend on each other; Start opens its listeners.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	s := &Server{cfg: cfg}
	if err := s.buildTracker(); err != nil {
		return nil, err
	}
	meter, grpcMetrics, err := s.buildMetrics()
	if err != nil {
		return nil, err
	}
	s.registry = registry.New(cfg.Log, 0)
	if err := registry.RegisterMetrics(meter, s.registry); err != nil {
		return nil, fmt.Errorf("registry metrics: %w", err)
	}
	s.registry.SetLimits(registry.Limits{
		MaxTunnelsPerAgent: cfg.Limits.MaxTunnelsPerAgent,
		MaxWaitingPerAgent: cfg.Limits.MaxWaitingPerAgent,
		MaxWaiting:         cfg.Limits.MaxWaiting,
	}, s.rejections.Hit)
	creds, err := s.buildCreds()
	if err != nil {
		return nil, err
	}
	if s.agentServer, err = s.newAgentServer(creds.agent, grpcMetrics); err != nil {
		return nil, err
	}
	if s.privateServer, err = s.newPrivateServer(creds, grpcMetrics); err != nil {
		return nil, err
	}
	if err := s.buildFinder(meter); err != nil {
		return nil, err
	}
	router, err := routing.NewRouter(routing.RouterConfig{
		Finder:              s.finder,
		FindTimeout:         cfg.FindTimeout,
		MaxMetadataBytes:    cfg.Limits.MaxMetadataBytes,
		MaxWaitingPerCaller: cfg.Limits.MaxWaitingPerCaller,
		OnLimit:             s.rejections.Hit,
		Presence:            s.registry.Presence,
		Meter:               meter,
		Tracer:              cfg.Tracer,
		Log:                 cfg.Log,
	})
	if err != nil {
		return nil, err
	}
	if err := registerPingAcks(meter, &s.pingAcks); err != nil {
		return nil, fmt.Errorf("public API metrics: %w", err)
	}
	s.apiServer, s.internalConn = s.newAPIServer(router, creds.server, grpcMetrics)
	return s, nil
}

// buildTracker makes the Redis tracker when the config asks for one and brings no tracker of its own.
func (s *Server) buildTracker() error {
	if s.cfg.Tracker != nil || s.cfg.Redis == nil {
		return nil
	}
	// go-redis logs every failed dial itself; route those lines to debug so that an outage is logged at a
	// bounded rate (by the registrar) rather than once per attempt.
	tracker.SetRedisLogger(s.cfg.Log)
	r, err := tracker.NewRedis(*s.cfg.Redis)
	if err != nil {
		return fmt.Errorf("redis tracker: %w", err)
	}
	s.ownedTracker, s.cfg.Tracker = r, r
	return nil
}

// buildMetrics makes the metrics provider (unless the config brings one), the limit rejections counter
// and the gRPC server metrics.
func (s *Server) buildMetrics() (metric.Meter, *grpcprom.ServerMetrics, error) {
	s.metrics = s.cfg.Metrics
	if s.metrics == nil {
		mp, err := NewMetrics(metrics.WithRuntimeMetrics())
		if err != nil {
			return nil, nil, err
		}
		s.metrics, s.ownsMP = mp, true
	}
	meter := s.metrics.Meter("github.com/tunnelbench/tunnelbench/core/kas")
	grpcMetrics, err := metrics.GRPCServer(s.metrics)
	if err != nil {
		return nil, nil, err
	}
	if s.rejections, err = limits.NewRejections(meter); err != nil {
		return nil, nil, err
	}
	return meter, grpcMetrics, nil
}

// buildFinder makes the directory (with a tracker) and the finder that uses it.
func (s *Server) buildFinder(meter metric.Meter) error {
	fc := routing.FinderConfig{Registry: s.registry, Dialer: s.gateways, UnservedGrace: s.cfg.UnservedGrace, Log: s.cfg.Log}
	if s.cfg.NoEagerGateway {
		fc.EagerTTL = -1
	}
	fc.EagerV1 = s.cfg.EagerGatewayV1
	fc.NoHopStreams = s.cfg.NoHopStreams
	if s.cfg.Tracker != nil {
		dir, err := directory.New(directory.Config{
			Tracker:         s.cfg.Tracker,
			UnregisterDelay: s.cfg.UnregisterDelay,
			Refresh:         s.cfg.TrackerRefresh,
			Log:             s.cfg.Log,
			Meter:           meter,
		})
		if err != nil {
			return err
		}
		s.dir, fc.Directory = dir, dir
		s.registry.OnAgent(dir.OnAgent)
	}
	s.finder = routing.NewFinder(fc)
	return s.finder.RegisterMetrics(meter)
}

// HopStreams reports how many hop streams this kas opened to other kas, and how many times a call took
// one that an earlier call had used (see routing.Finder.HopStreams).
func (s *Server) HopStreams() (opened, reused int64) { return s.finder.HopStreams() }

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

// InternalConn is a connection to kas's routing for callers in the same process: any method called on it
// with the kas-hop-routing-agent-id metadata is routed to that agent, through the same limits and
// metrics as the public API (no caller authentication). It needs no closing.
func (s *Server) InternalConn() grpc.ClientConnInterface {
	return s.internalConn
}

// Registry is kas's tunnel registry.
func (s *Server) Registry() *registry.Registry {
	return s.registry
}

// Metrics is kas's metrics provider.
func (s *Server) Metrics() *metrics.Provider {
	return s.metrics
}
