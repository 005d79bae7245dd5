package kas

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tunserver/directory"

	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing"
	"go.opentelemetry.io/otel/trace"
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
	Authenticator auth.AgentAuthenticator
	// FindTimeout bounds how long a call waits for a tunnel. Zero means routing.DefaultFindTimeout.
	FindTimeout time.Duration
	// UnservedGrace is how long a call waits when the agent is connected but none of its tunnels serve
	// the method, before it fails with Unimplemented. Zero means presence.DefaultUnservedGrace;
	// negative waits the find timeout.
	UnservedGrace time.Duration
	// MaxConnectionAge rotates agent connections. Zero means DefaultMaxConnectionAge; negative disables.
	MaxConnectionAge time.Duration
	// ShutdownGrace bounds how long calls in flight may run after Shutdown begins.
	ShutdownGrace time.Duration
	// SingleUseTunnels gives every tunnel one call, even to agents that ask for reusable tunnels: the
	// protocol's first version, kept to measure it beside reuse.
	SingleUseTunnels bool
	// NoTunnelBatches refuses batches on every tunnel (rpc.RequestBatch), as kas before them did: each
	// message of a call then travels as a gRPC message of its own. To compare, and for mixed versions.
	NoTunnelBatches bool
	// NoEagerGateway turns eager gateway streams off, both ways: this kas neither asks another kas for
	// one nor announces that it serves them, as kas before them did (see routing.eagerGateway).
	NoEagerGateway bool
	// EagerGatewayV1 keeps eager streams at their first version, both ways (no late tunnel_ready and no
	// batches, see rpc.GatewayEagerV2): this kas neither offers the second on its eager streams nor serves
	// it as a gateway, as kas before it did. For mixed versions.
	EagerGatewayV1 bool
	// NoHopStreams turns hop streams off, both ways: this kas neither carries its eager calls to another
	// kas on kept streams nor announces that it serves them, as kas before them did (see gateway.proto).
	NoHopStreams bool
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
	// UnregisterDelay: see directory.DefaultUnregisterDelay. Zero means the default.
	UnregisterDelay time.Duration

	// TLS, when set, serves every listener over TLS (the metrics listener only with TLS.Metrics).
	TLS *TLSConfig
	// Callers authorizes callers of the public API and the HTTP listener by bearer token. Nil requires
	// Dev.
	Callers auth.CallerAuthorizer
	// Dev serves the public API and the HTTP listener without caller authentication. It is refused
	// unless those listeners are on loopback.
	Dev bool
	// Limits bound what one agent or caller can make kas do; see limits.Default.
	Limits limits.Limits

	// GatewayTunnelReadyHook, when set, is called by the private API after tunnel_ready and before
	// start_streaming, with a function that breaks the found tunnel: tests use it to make that race
	// happen. Nil in production.
	GatewayTunnelReadyHook func(agentID int64, breakTunnel func())

	// Tracer records routing spans; nil records none (trace context still reaches agents).
	Tracer trace.Tracer
	// OTLPEndpoint is used by Main to make Tracer (see tracing.Provider).
	OTLPEndpoint string

	// Metrics is where kas records its metrics: a provider from NewMetrics, or nil for one with Go runtime
	// metrics. A provider from metrics.New lacks the exponential routing histogram's aggregation.
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

// validate reports every problem of c in one error. It changes nothing: zero values stand for defaults
// (see withDefaults).
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
	if len(c.PrivateAPISecret) > 0 && len(c.PrivateAPISecret) < auth.MinPrivateSecretLen {
		errs = append(errs, fmt.Errorf("the private API secret must be at least %d bytes, got %d", auth.MinPrivateSecretLen, len(c.PrivateAPISecret)))
	}
	if c.PrivateURL != "" {
		if _, _, err := routing.ParsePrivateURL(c.PrivateURL); err != nil {
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
	if err := c.Limits.Validate(cmp.Or(c.MaxMessageSize, DefaultMaxMessageSize)); err != nil {
		errs = append(errs, err)
	}
	if c.TrackerRefresh < 0 || c.UnregisterDelay < 0 {
		errs = append(errs, errors.New("tracker refresh and unregister delay must not be negative"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("kas config: %w", errors.Join(errs...))
	}
	return nil
}

// withDefaults fills the zero values of a validated config with the defaults.
func (c *Config) withDefaults() {
	c.Limits = c.Limits.WithDefaults(cmp.Or(c.MaxMessageSize, DefaultMaxMessageSize))
	if c.TrackerRefresh == 0 {
		c.TrackerRefresh = tracker.DefaultRefreshPeriod
		if c.Redis != nil {
			c.TrackerRefresh = c.Redis.WithDefaults().RefreshPeriod
		}
	}
	if c.UnregisterDelay == 0 {
		c.UnregisterDelay = directory.DefaultUnregisterDelay
	}
	if c.FindTimeout == 0 {
		c.FindTimeout = routing.DefaultFindTimeout
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
