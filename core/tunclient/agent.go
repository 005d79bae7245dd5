package tunclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient/reconnect"
	"github.com/tunnelbench/tunnelbench/core/workers"
)

// Pool defaults.
const (
	// DefaultMinIdle idle tunnels are kept open, so that calls rarely wait for one. One is enough when
	// tunnels carry call after call: a call that takes it makes the pool open more at once.
	DefaultMinIdle = 1
	// DefaultMinIdleSingleUse is the default with single-use tunnels (SingleUse): each call ends its
	// tunnel, so a second one waits for the next call while the first is replaced.
	DefaultMinIdleSingleUse = 2
	// DefaultMaxConnections bounds the tunnels of one agent.
	DefaultMaxConnections = 500
	// DefaultScaleUpStep tunnels are opened at once when idle tunnels run short.
	DefaultScaleUpStep = 10
	// DefaultMaxIdleTime is how long a tunnel above the minimum may stay idle before the agent closes it.
	DefaultMaxIdleTime = time.Minute
	// DefaultShutdownReconnectJitter spreads the reconnects of agents whose kas shut down, so that they do
	// not all arrive at the surviving kas at once.
	DefaultShutdownReconnectJitter = 2 * time.Second
	// DefaultDrainTimeout: see Config.DrainTimeout.
	DefaultDrainTimeout = 10 * time.Second
	// DefaultMaxMessageSize is the largest request or response message the agent proxies.
	DefaultMaxMessageSize = 4 << 20
	// tunnelOverhead is room for the envelope around a proxied message on the tunnel.
	tunnelOverhead = 64 << 10
)

// Config configures an Agent. Zero values mean the defaults above.
type Config struct {
	// KasConn is the connection to kas's agent API, with the agent's token. Required. The agent does not
	// close it.
	KasConn grpc.ClientConnInterface

	MinIdle        int
	MaxConnections int
	ScaleUpStep    int
	MaxIdleTime    time.Duration
	// Backoff after connection errors. The zero value means reconnect.DefaultBackoff.
	Backoff reconnect.Backoff
	// ShutdownReconnectJitter: after kas says it is shutting down, a tunnel waits a random time below
	// this before it reconnects. Negative means no wait.
	ShutdownReconnectJitter time.Duration
	// MaxMessageSize bounds proxied messages in both directions.
	MaxMessageSize int
	// UnaryInterceptors and StreamInterceptors run around every call of a registered service, the
	// first outermost, as grpc.ChainUnaryInterceptor and grpc.ChainStreamInterceptor order them.
	UnaryInterceptors  []grpc.UnaryServerInterceptor
	StreamInterceptors []grpc.StreamServerInterceptor
	// BufconnServer serves registered services on a grpc.Server behind an in-memory bufconn listener,
	// as the seed design has it, instead of straight from the tunnel. The calls behave the same; each
	// costs two more HTTP/2 transports and several goroutine hand-offs (about 130 µs more per unary
	// call on a 2-core machine). It is there to compare with, and for services that need grpc.Server
	// itself.
	BufconnServer bool
	// DrainTimeout bounds how long a tunnel whose call the agent finished waits for kas to end its side
	// (and a call kas ended waits for its handler) before the agent gives up the tunnel.
	DrainTimeout time.Duration
	// SingleUse opens a tunnel per call, as the protocol's first version does, instead of asking kas for
	// reusable tunnels that carry call after call. It is there to compare with; a kas that does not offer
	// reuse gets single-use tunnels anyway.
	SingleUse bool
	// NoBatches: never offer kas batches (rpc.RequestBatch), so that each message of a call travels as
	// a gRPC message of its own, as agents before batches did. To compare, and for mixed versions.
	NoBatches bool
	// NoEndTunnel: never offer to end a tunnel when kas asks (rpc.EndTunnel), so that kas ends it by
	// returning from its handler and reads it on a goroutine of its own, as with agents before
	// Descriptor.ends_on_request. For mixed versions.
	NoEndTunnel bool

	// Meter records the agent's metrics. Nil records nothing.
	Meter metric.Meter
	// Tracer records a span per proxied call. Nil records none; trace context still reaches services.
	Tracer trace.Tracer
	Log    *slog.Logger

	// afterFunc starts the MaxIdleTime timers of idle tunnels. Nil means time.AfterFunc; tests set it to
	// fire the timers themselves.
	afterFunc func(d time.Duration, f func()) idleTimer
	// connectLogInterval: see reconnect.DefaultLogInterval. Zero means the default; tests shorten it.
	connectLogInterval time.Duration
}

func (c *Config) applyDefaults() error {
	var errs []error
	if c.KasConn == nil {
		errs = append(errs, errors.New("kas connection is required"))
	}
	defInt := func(name string, v *int, def int) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", name, *v))
		}
	}
	minIdle := DefaultMinIdle
	if c.SingleUse {
		minIdle = DefaultMinIdleSingleUse
	}
	defInt("min idle", &c.MinIdle, minIdle)
	defInt("max connections", &c.MaxConnections, DefaultMaxConnections)
	defInt("scale-up step", &c.ScaleUpStep, DefaultScaleUpStep)
	defInt("max message size", &c.MaxMessageSize, DefaultMaxMessageSize)
	if c.MinIdle > c.MaxConnections {
		errs = append(errs, fmt.Errorf("min idle (%d) must not exceed max connections (%d)", c.MinIdle, c.MaxConnections))
	}
	switch {
	case c.DrainTimeout == 0:
		c.DrainTimeout = DefaultDrainTimeout
	case c.DrainTimeout < 0:
		errs = append(errs, fmt.Errorf("drain timeout must be positive, got %s", c.DrainTimeout))
	}
	switch {
	case c.MaxIdleTime == 0:
		c.MaxIdleTime = DefaultMaxIdleTime
	case c.MaxIdleTime < 0:
		errs = append(errs, fmt.Errorf("max idle time must be positive, got %s", c.MaxIdleTime))
	}
	if c.Backoff == (reconnect.Backoff{}) {
		c.Backoff = reconnect.DefaultBackoff
	} else if err := c.Backoff.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ShutdownReconnectJitter == 0 {
		c.ShutdownReconnectJitter = DefaultShutdownReconnectJitter
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.afterFunc == nil {
		c.afterFunc = afterFunc
	}
	if c.connectLogInterval == 0 {
		c.connectLogInterval = reconnect.DefaultLogInterval
	}
	if c.Tracer == nil {
		c.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if len(errs) > 0 {
		return fmt.Errorf("agent config: %w", errors.Join(errs...))
	}
	return nil
}

// Agent serves the services registered on it through tunnels to kas. Register services, then Start;
// Stop ends it.
type Agent struct {
	cfg Config
	// mux serves registered services straight from the tunnels. It also holds what is registered
	// when BufconnServer serves the calls instead.
	mux     *grpctool.ServiceMux
	health  *health.Server
	metrics *agentMetrics
	// workers run the calls' handlers (and the kas side of a call to an upstream).
	workers *workers.Pool
	// The bufconn server and the agent's connection to it, with Config.BufconnServer only.
	server   *grpc.Server
	listener *grpctool.InMemoryListener
	local    *grpc.ClientConn

	mu        sync.Mutex
	started   bool
	stopped   bool
	upstreams map[string]grpc.ClientConnInterface
	// descriptorMsg is the first message of every tunnel, encoded once.
	descriptorMsg []byte
	pool          *pool
	serveDone     chan struct{}
}

// New returns an agent whose in-memory server already serves gRPC health and server reflection.
func New(cfg Config) (*Agent, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:       cfg,
		mux:       grpctool.NewServiceMux(cfg.UnaryInterceptors, cfg.StreamInterceptors),
		health:    health.NewServer(),
		workers:   workers.New(),
		upstreams: make(map[string]grpc.ClientConnInterface),
	}
	if cfg.BufconnServer {
		opts := append([]grpc.ServerOption{
			grpc.MaxRecvMsgSize(cfg.MaxMessageSize),
			grpc.MaxSendMsgSize(cfg.MaxMessageSize),
			// Every call through a tunnel is a stream on this server: reuse goroutines for them.
			grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
			grpc.ChainUnaryInterceptor(cfg.UnaryInterceptors...),
			grpc.ChainStreamInterceptor(cfg.StreamInterceptors...),
		}, grpctool.WindowServerOptions()...)
		a.server = grpc.NewServer(opts...)
		a.listener = grpctool.NewInMemoryListener()
	}
	m, err := newAgentMetrics(cfg.Meter, a.Stats)
	if err != nil {
		return nil, err
	}
	a.metrics = m
	healthpb.RegisterHealthServer(a, a.health)
	reflection.Register(a)
	return a, nil
}

// RegisterService implements grpc.ServiceRegistrar. Register before Start.
func (a *Agent) RegisterService(desc *grpc.ServiceDesc, impl any) {
	a.mux.RegisterService(desc, impl)
	if a.server != nil {
		a.server.RegisterService(desc, impl)
	}
}

// GetServiceInfo lists the registered services, as grpc.Server.GetServiceInfo does; with RegisterService
// it is what server reflection needs of a server.
func (a *Agent) GetServiceInfo() map[string]grpc.ServiceInfo {
	return a.mux.GetServiceInfo()
}

// Health is the agent's health server, to report service status through the tunnel.
func (a *Agent) Health() *health.Server {
	return a.health
}

// Expose advertises service with all its methods and forwards its calls, as raw frames, to conn instead
// of the in-memory server. Call before Start.
func (a *Agent) Expose(service string, conn grpc.ClientConnInterface) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return errors.New("expose: agent already started")
	}
	if _, ok := a.mux.GetServiceInfo()[service]; ok {
		return fmt.Errorf("expose: service %s is already registered on the agent", service)
	}
	a.upstreams[service] = conn
	return nil
}

// Start serves the in-memory server and opens the tunnel pool.
func (a *Agent) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return errors.New("agent already started")
	}
	exposed := make([]string, 0, len(a.upstreams))
	for name := range a.upstreams {
		exposed = append(exposed, name)
	}
	d := descriptorFor(a.mux.GetServiceInfo(), exposed)
	d.Reuse = !a.cfg.SingleUse
	d.Batches = a.offersBatches()
	d.EndsOnRequest = a.endsOnRequest()
	var err error
	a.descriptorMsg, err = proto.Marshal(&rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Descriptor_{Descriptor_: d}})
	if err != nil {
		return fmt.Errorf("encode descriptor: %w", err)
	}
	if a.server != nil {
		local, err := grpctool.DialInMemory(a.listener,
			grpc.WithDefaultCallOptions(
				grpc.MaxCallRecvMsgSize(a.cfg.MaxMessageSize),
				grpc.MaxCallSendMsgSize(a.cfg.MaxMessageSize),
			),
		)
		if err != nil {
			return fmt.Errorf("dial in-memory server: %w", err)
		}
		a.local = local
		a.serveDone = make(chan struct{})
		go func() {
			defer close(a.serveDone)
			_ = a.server.Serve(a.listener) // returns when the server stops
		}()
	}
	a.started = true
	a.pool = newPool(a)
	a.pool.start()
	return nil
}

// Stop withdraws idle tunnels, stops opening new ones and lets calls in flight finish. When ctx ends
// first, calls still running are cancelled. Stop returns only after every goroutine of the agent ended.
// An agent that was never started must be stopped too: with BufconnServer its server holds goroutines
// from New on.
func (a *Agent) Stop(ctx context.Context) {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	a.stopped = true
	started := a.started
	a.mu.Unlock()
	if started {
		a.pool.stop(ctx)
	}
	if a.server == nil {
		return
	}
	a.server.Stop()
	if started {
		<-a.serveDone
		_ = a.local.Close()
	}
}

// offersBatches: the agent's descriptor offers kas batches.
func (a *Agent) offersBatches() bool { return !a.cfg.SingleUse && !a.cfg.NoBatches }

// endsOnRequest: the agent's descriptor offers to end a tunnel when kas sends rpc.EndTunnel.
func (a *Agent) endsOnRequest() bool { return !a.cfg.SingleUse && !a.cfg.NoEndTunnel }

// Stats is a snapshot of the tunnel pool.
type Stats struct {
	Connecting, Idle, Busy int
}

// Stats returns the pool's current counts.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	p := a.pool
	a.mu.Unlock()
	if p == nil {
		return Stats{}
	}
	return p.stats()
}

// target is the connection a call of service goes to: an exposed upstream or the bufconn server. Nil
// means the agent serves the call itself, from the tunnel.
func (a *Agent) target(service string) grpc.ClientConnInterface {
	if up, ok := a.upstreams[service]; ok {
		return up
	}
	if a.local != nil {
		return a.local
	}
	return nil
}

// MaxMessageSize is the largest message the agent proxies.
func (a *Agent) MaxMessageSize() int {
	return a.cfg.MaxMessageSize
}
