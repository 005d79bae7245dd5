package topology

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tracker"
)

// SecretSize is the size of the private API secret NewSecret makes.
const SecretSize = 32

// AgentToken is the token of agent id in harness topologies.
func AgentToken(id int64) string { return fmt.Sprintf("bench-agent-%d", id) }

// AgentTokens authenticates agents 1..n, agent id by token(id) (AgentToken when token is nil).
func AgentTokens(n int, token func(int64) string) (*auth.StaticTokens, error) {
	if token == nil {
		token = AgentToken
	}
	tokens := make(map[string]int64, max(n, 0))
	for id := int64(1); id <= int64(n); id++ {
		tokens[token(id)] = id
	}
	return auth.NewStaticTokens(tokens)
}

// NewSecret returns a random private API secret, for the kas of one topology to share.
func NewSecret() ([]byte, error) {
	secret := make([]byte, SecretSize)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	return secret, nil
}

// KasConfig is one kas of a topology: what topologies choose; kas's defaults do the rest. Zero values
// are fine, except Auth.
type KasConfig struct {
	// Index is the kas's place in its topology; its hops carry it.
	Index int
	// Link is how peers reach this kas; nil means TCP.
	Link Link
	// Auth maps agent tokens to agent ids (see AgentTokens). Required.
	Auth auth.AgentAuthenticator
	// AgentOnly serves the agent API and nothing else (bench's scale case measures just that).
	AgentOnly bool
	// Private serves the private API even without a tracker, so that the kas->kas hop exists.
	Private bool
	// HTTP serves HTTP for agents, on loopback TCP whatever the link.
	HTTP bool
	// Tracker is shared by the kas of a topology. With it or Redis, kas serves the private API and needs
	// Secret.
	Tracker tracker.Tracker
	// Redis gives this kas a Redis tracker of its own, closed with the kas. Address is Redis's own: the
	// tracker reaches it over the link's kas->redis hop.
	Redis *tracker.RedisConfig
	// Secret is the private API secret of the topology (NewSecret).
	Secret []byte
	// MaxConnectionAge rotates agent connections; zero or negative never does (unlike kas, whose zero
	// is its default age: a harness run rotates only when asked).
	MaxConnectionAge time.Duration
	// These go to kas as they are; zero means kas's default.
	FindTimeout     time.Duration
	ShutdownGrace   time.Duration
	MaxMessageSize  int
	TrackerRefresh  time.Duration
	UnregisterDelay time.Duration
	Log             *slog.Logger
	// Adjust, when set, changes kas's config last, for what this struct does not have. When it replaces
	// a listener (by setting another net.Listener), the one the link opened is closed and peers reach
	// the replacement directly over TCP.
	Adjust func(*kas.Config)
}

func (c *KasConfig) validate() error {
	var errs []error
	if c.Auth == nil {
		errs = append(errs, errors.New("an agent authenticator is required (see AgentTokens)"))
	}
	if c.Index < 0 {
		errs = append(errs, fmt.Errorf("index must not be negative, got %d", c.Index))
	}
	if c.Tracker != nil && c.Redis != nil {
		errs = append(errs, errors.New("a shared tracker and a Redis tracker of its own exclude each other"))
	}
	if (c.Tracker != nil || c.Redis != nil) && len(c.Secret) == 0 {
		errs = append(errs, errors.New("a kas with a tracker needs the private API secret (see NewSecret)"))
	}
	if c.AgentOnly && (c.HTTP || c.Private || c.Tracker != nil || c.Redis != nil) {
		errs = append(errs, errors.New("an agent-only kas serves no HTTP and no private API"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("kas %d config: %w", c.Index, errors.Join(errs...))
	}
	return nil
}

// Kas is a running kas of a topology.
type Kas struct {
	Index   int
	Server  *kas.Server
	Metrics *metrics.Provider
	link    Link
	// direct are the routes to the listeners the link opened, by the kind of hop that reaches them.
	direct map[HopKind]Route
	redis  *tracker.Redis
}

// StartKas builds kas's config from cfg, opens its listeners on cfg.Link and starts it.
func StartKas(cfg KasConfig) (_ *Kas, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Link == nil {
		cfg.Link = TCP
	}
	k := &Kas{Index: cfg.Index, link: cfg.Link, direct: map[HopKind]Route{}}
	opened := map[HopKind]net.Listener{}
	defer func() {
		if err != nil {
			for _, l := range opened {
				_ = l.Close()
			}
			k.closeDeps()
			err = fmt.Errorf("start kas %d: %w", cfg.Index, err)
		}
	}()
	kc, err := k.config(cfg, opened)
	if err != nil {
		return nil, err
	}
	if cfg.Adjust != nil {
		cfg.Adjust(&kc)
	}
	for kind, l := range opened {
		if *listener(&kc, kind) != l {
			_ = l.Close() // replaced: peers reach the replacement by its address
			delete(opened, kind)
			delete(k.direct, kind)
		}
	}
	if k.Server, err = kas.New(kc); err != nil {
		return nil, err
	}
	return k, k.Server.Start()
}

// config is kas's config for cfg, with the listeners the link opened (recorded in opened).
func (k *Kas) config(cfg KasConfig, opened map[HopKind]net.Listener) (kas.Config, error) {
	kc := kas.Config{
		Dev:              true, // loopback and in-memory listeners only
		Authenticator:    cfg.Auth,
		FindTimeout:      cfg.FindTimeout,
		MaxConnectionAge: cfg.MaxConnectionAge,
		ShutdownGrace:    cfg.ShutdownGrace,
		MaxMessageSize:   cfg.MaxMessageSize,
		Tracker:          cfg.Tracker,
		PrivateAPISecret: cfg.Secret,
		TrackerRefresh:   cfg.TrackerRefresh,
		UnregisterDelay:  cfg.UnregisterDelay,
		Log:              cfg.Log,
	}
	if kc.MaxConnectionAge <= 0 {
		kc.MaxConnectionAge = -1
	}
	if cfg.HTTP {
		kc.HTTPListen = "127.0.0.1:0"
	}
	kinds := []HopKind{AgentKas}
	if !cfg.AgentOnly {
		kinds = append(kinds, CallerKas)
	}
	if cfg.Private || cfg.Tracker != nil || cfg.Redis != nil {
		kinds = append(kinds, KasKas)
	}
	for _, kind := range kinds {
		l, direct, err := cfg.Link.Listen(Hop{Kind: kind, Kas: cfg.Index})
		if err != nil {
			return kc, fmt.Errorf("listen for %s: %w", kind, err)
		}
		opened[kind], k.direct[kind] = l, direct
		*listener(&kc, kind) = l
	}
	if _, ok := opened[KasKas]; ok {
		r, err := k.Route(Hop{Kind: KasKas})
		if err != nil {
			return kc, err
		}
		if r.Target != k.direct[KasKas].Target {
			kc.PrivateURL = "grpc://" + r.Target // other kas take the link's way, not the direct one
		}
	}
	var err error
	if k.Metrics, err = kas.NewMetrics(); err != nil {
		return kc, err
	}
	kc.Metrics = k.Metrics
	if cfg.Redis != nil {
		if kc.Tracker, err = k.redisTracker(*cfg.Redis); err != nil {
			return kc, err
		}
	}
	return kc, nil
}

func (k *Kas) redisTracker(rc tracker.RedisConfig) (tracker.Tracker, error) {
	r, err := k.link.Route(Hop{Kind: KasRedis, Kas: k.Index}, Route{Target: rc.Address})
	if err != nil {
		return nil, err
	}
	rc.Address = r.Target
	if k.redis, err = tracker.NewRedis(rc); err != nil {
		return nil, fmt.Errorf("redis tracker: %w", err)
	}
	return k.redis, nil
}

// listener is the field of kc that holds the listener at the far end of a hop of kind.
func listener(kc *kas.Config, kind HopKind) *net.Listener {
	switch kind {
	case AgentKas:
		return &kc.AgentListener
	case CallerKas:
		return &kc.APIListener
	default:
		return &kc.PrivateListener
	}
}

// Route is how the near end of h reaches this kas (h.Kas is set to this kas's index): through the
// link, from the listener the link opened or, where Adjust replaced it, from its TCP address.
func (k *Kas) Route(h Hop) (Route, error) {
	h.Kas = k.Index
	direct, ok := k.direct[h.Kind]
	if !ok {
		var addr net.Addr
		switch a := k.Server.Addrs(); h.Kind {
		case AgentKas:
			addr = a.Agent
		case CallerKas:
			addr = a.API
		case KasKas:
			addr = a.Private
		}
		if addr == nil {
			return Route{}, fmt.Errorf("kas %d has no listener for %s", k.Index, h.Kind)
		}
		direct = Route{Target: addr.String()}
	}
	return k.link.Route(h, direct)
}

// AgentRoute is how agent id reaches this kas's agent API.
func (k *Kas) AgentRoute(id int64) (Route, error) { return k.Route(Hop{Kind: AgentKas, Agent: id}) }

// DialAPI connects a caller to this kas's public API, over the link's caller->kas hop.
func (k *Kas) DialAPI(opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	r, err := k.Route(Hop{Kind: CallerKas})
	if err != nil {
		return nil, err
	}
	return Dial(r, opts...)
}

// Kill stops kas at once, as a crash would. Shutdown still releases the rest.
func (k *Kas) Kill() { k.Server.Kill() }

// Shutdown stops kas gracefully (calls in flight finish within ctx and kas's grace), then its metrics
// and its Redis tracker. It may be called again, and after Kill.
func (k *Kas) Shutdown(ctx context.Context) {
	k.Server.Shutdown(ctx)
	k.closeDeps()
}

func (k *Kas) closeDeps() {
	if k.Metrics != nil {
		_ = k.Metrics.Shutdown(context.Background())
	}
	if k.redis != nil {
		_ = k.redis.Close()
	}
}
