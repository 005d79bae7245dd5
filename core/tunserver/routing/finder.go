package routing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
)

// Finder defaults.
const (
	// DefaultStagger spaces the attempts on different gateways of one call.
	DefaultStagger = 10 * time.Millisecond
	// DefaultGatewayBackoffMin and Max bound the pause before a failing gateway is tried again.
	DefaultGatewayBackoffMin = 100 * time.Millisecond
	DefaultGatewayBackoffMax = time.Second
)

// FindRequest describes the call a gateway is wanted for.
type FindRequest struct {
	AgentID         int64
	FullMethod      string
	Service, Method string
	// Metadata is the caller's; a remote gateway gets it without reserved keys and credentials (see
	// toGateway).
	Metadata    metadata.MD
	FindTimeout time.Duration
	// NoEager: search even when a gateway is remembered for the agent (its eager stream missed).
	NoEager bool
}

// Gateway is where a found call goes: a tunnel of this kas, or the gateway stream to another kas that
// holds one (already sent start_streaming). Release must always be called.
type Gateway interface {
	// Forward carries the call: its request from pump, the agent's answer to w. It returns
	// registry.ErrRetryOtherTunnel when the call may go to another tunnel.
	Forward(ctx context.Context, pump *request.Pump, w *callerWriter) error
	// URL is the gateway kas's private URL; empty for this kas.
	URL() string
	// Release gives back a tunnel that was not used and ends a gateway stream.
	Release()
}

// localGateway is a tunnel of this kas.
type localGateway struct {
	handle registry.Handle
	tunnel registry.Forwarder
}

func (g *localGateway) Forward(ctx context.Context, pump *request.Pump, w *callerWriter) error {
	return g.tunnel.Forward(ctx, pump, w.agentMessage)
}
func (g *localGateway) URL() string { return "" }
func (g *localGateway) Release()    { g.handle.Done() }

// remoteGateway is the gateway stream to another kas.
type remoteGateway struct {
	stream grpc.ClientStream
	cancel context.CancelFunc
	url    string
	// eager: the gateway serves eager streams; hop: and hop streams.
	eager, hop bool
}

func (g *remoteGateway) Forward(ctx context.Context, pump *request.Pump, w *callerWriter) error {
	return forwardRemote(ctx, w, g.stream, pump)
}
func (g *remoteGateway) URL() string { return g.url }
func (g *remoteGateway) Release()    { g.cancel() }

// TunnelSource is this kas's tunnels as the finder sees them: *registry.Registry, or a fake in tests.
type TunnelSource interface {
	FindTunnel(agentID int64, service, method string) (found bool, h registry.Handle)
	// Presence tells whether the agent's tunnels here serve the method (see registry.Presence).
	Presence(agentID int64, service, method string) presence.Presence
}

// GatewayFinder finds the gateway for a call. When no gateway has a tunnel within FindTimeout it returns
// a *findTimeoutError.
type GatewayFinder interface {
	FindGateway(ctx context.Context, req FindRequest) (Gateway, error)
}

type findTimeoutError struct {
	timeout time.Duration
}

func (e *findTimeoutError) Error() string {
	return fmt.Sprintf("no tunnel found within %s", e.timeout)
}

// GatewayDialer returns the connection to a gateway kas by its private URL.
type GatewayDialer interface {
	Conn(privateURL string) (grpc.ClientConnInterface, error)
}

// FinderConfig configures a Finder.
type FinderConfig struct {
	Registry TunnelSource
	// Directory lists, and lists again, the kas instances that hold tunnels for an agent (a
	// *directory.Directory). Nil: this kas is the only gateway.
	Directory Watcher
	// SelfURL is this kas's private URL: listed by the tracker, never dialed.
	SelfURL string
	Dialer  GatewayDialer
	// Zero values mean the defaults above.
	Stagger                time.Duration
	BackoffMin, BackoffMax time.Duration
	// EagerTTL is how long the gateway where an agent was found is asked first, alone and without a
	// round trip (see eagerGateway). Zero means DefaultEagerTTL; negative turns eager streams off.
	EagerTTL time.Duration
	// EagerV1: eager streams offer only their first version (no late tunnel_ready, no batches; see
	// rpc.GatewayEagerV2), as kas before the second did. For mixed versions.
	EagerV1 bool
	// NoHopStreams: eager calls open a gateway stream each, as kas before hop streams did, even to a
	// gateway that serves hop streams. For mixed versions, and to measure what hop streams save.
	NoHopStreams bool
	// MaxIdleHops and HopIdleTimeout bound the idle hop streams kept per gateway (see hopPool); zero
	// means DefaultMaxIdleHops and DefaultHopIdleTimeout.
	MaxIdleHops    int
	HopIdleTimeout time.Duration
	// UnservedGrace: a call whose agent is connected, with tunnels none of which serve the method,
	// fails with Unimplemented after this grace (see presence.WatchUnserved) instead of waiting the
	// whole find timeout. Zero means presence.DefaultUnservedGrace; negative waits the find timeout.
	UnservedGrace time.Duration
	Log           *slog.Logger
}

// Watcher watches which kas hold an agent's tunnels.
type Watcher interface {
	// Watch sends the kas URLs that hold agentID, and again whenever they change, until stop.
	Watch(agentID int64) (urls <-chan []string, stop func())
}

// Finder finds gateways: this kas first (in memory), then every kas the tracker lists for the agent,
// staggered and in parallel, for as long as the call may wait. The first gateway with a tunnel wins;
// the others are cancelled and give their tunnel back.
type Finder struct {
	cfg FinderConfig

	mu      sync.Mutex
	backoff map[string]*gatewayBackoff
	// lastGW is nil when eager streams are off.
	lastGW *lastGateways
	// hops is nil when eager or hop streams are off.
	hops *hopPool
}

type gatewayBackoff struct {
	until time.Time
	next  time.Duration
}

// NewFinder returns a finder.
func NewFinder(cfg FinderConfig) *Finder {
	if cfg.Stagger <= 0 {
		cfg.Stagger = DefaultStagger
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = DefaultGatewayBackoffMin
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(DefaultGatewayBackoffMax, cfg.BackoffMin)
	}
	if cfg.UnservedGrace == 0 {
		cfg.UnservedGrace = presence.DefaultUnservedGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	f := &Finder{cfg: cfg, backoff: map[string]*gatewayBackoff{}}
	if cfg.EagerTTL >= 0 {
		f.lastGW = newLastGateways(cmp.Or(cfg.EagerTTL, DefaultEagerTTL))
		if !cfg.NoHopStreams && cfg.Dialer != nil {
			f.hops = newHopPool(cfg.Dialer, cmp.Or(cfg.MaxIdleHops, DefaultMaxIdleHops), cmp.Or(cfg.HopIdleTimeout, DefaultHopIdleTimeout))
		}
	}
	return f
}

// Close ends the hop streams this finder keeps, and waits until they ended; a call that would take one
// afterwards goes through the usual search instead.
func (f *Finder) Close() {
	if f.hops != nil {
		f.hops.close()
	}
}

// HopStreamsMetric counts hop streams to other kas (see gateway.proto): event "opened" for each stream
// opened, "reused" for each call that took a stream an earlier call had used.
const HopStreamsMetric = "tunnel_routing_hop_streams"

// RegisterMetrics records the finder's hop stream counts on m; a nil m records nothing.
func (f *Finder) RegisterMetrics(m metric.Meter) error {
	if m == nil {
		return nil
	}
	c, err := m.Int64ObservableCounter(HopStreamsMetric, metric.WithDescription("Hop streams to other kas: opened, and reused by a later call"))
	if err != nil {
		return err
	}
	opened := metric.WithAttributeSet(attribute.NewSet(attribute.String("event", "opened")))
	reused := metric.WithAttributeSet(attribute.NewSet(attribute.String("event", "reused")))
	_, err = m.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		o, r := f.HopStreams()
		obs.ObserveInt64(c, o, opened)
		obs.ObserveInt64(c, r, reused)
		return nil
	}, c)
	return err
}

// HopStreams reports how many hop streams the finder opened, and how many times a call took one
// that an earlier call had used.
func (f *Finder) HopStreams() (opened, reused int64) {
	if f.hops == nil {
		return 0, 0
	}
	return f.hops.counts.opened.Load(), f.hops.counts.reused.Load()
}

// attemptResult is how one gateway attempt ended.
type attemptResult struct {
	gw  Gateway
	url string // the remote gateway tried; empty for this kas
	att *remoteAttempt
	err error
}

// remoteAttempt is one attempt of a find on a remote gateway.
type remoteAttempt struct {
	cancel context.CancelFunc
}

// FindGateway implements GatewayFinder.
func (f *Finder) FindGateway(ctx context.Context, req FindRequest) (Gateway, error) {
	found, h := f.cfg.Registry.FindTunnel(req.AgentID, req.Service, req.Method)
	if found {
		t, _ := h.Get(ctx) // never blocks when found
		return &localGateway{handle: h, tunnel: t}, nil
	}
	if f.lastGW != nil && f.cfg.Directory != nil && !req.NoEager {
		if g, ok := f.lastGW.get(req.AgentID); ok {
			h.Done()
			return &eagerGateway{f: f, url: g.url, hop: g.hop && f.hops != nil, req: req}, nil
		}
	}
	findCtx, cancel := context.WithTimeout(ctx, req.FindTimeout)
	defer cancel()
	if f.cfg.Directory == nil {
		t, err := presence.GetServed(findCtx, h, f.cfg.Registry, req.watched(), f.cfg.UnservedGrace, f.unservedError(req))
		if err != nil {
			h.Done()
			return nil, findErr(ctx, findCtx, req, err)
		}
		return &localGateway{handle: h, tunnel: t}, nil
	}
	s := &search{f: f, ctx: ctx, findCtx: findCtx, req: req, results: make(chan attemptResult), verdicts: make(chan bool),
		abandoned: make(chan struct{}), attempts: map[string]*remoteAttempt{}, unserved: map[string]error{},
		stagger: time.NewTimer(time.Hour)}
	s.stagger.Stop()
	defer s.end()
	go s.waitLocal(h)
	updates, unsubscribe := f.cfg.Directory.Watch(req.AgentID)
	defer unsubscribe()
	for {
		select {
		case urls := <-updates:
			s.update(urls)
			if err := s.unservedEverywhere(); err != nil {
				return nil, err
			}
		case s.localUnserved = <-s.verdicts:
			if err := s.unservedEverywhere(); err != nil {
				return nil, err
			}
		case <-s.stagger.C:
			s.startNext()
		case r := <-s.results:
			if over, gw, err := s.result(r); over {
				return gw, err
			}
		case <-findCtx.Done():
			return nil, s.timedOut()
		}
	}
}

// search is one find on this kas and on the gateways the tracker lists, staggered and in parallel.
// Every attempt runs in its own goroutine and hands its result over, or, once the search has picked a
// gateway or given up, releases what it found itself.
type search struct {
	f            *Finder
	ctx, findCtx context.Context
	req          FindRequest
	results      chan attemptResult
	abandoned    chan struct{} // closed when the search is over
	// attempts are the remote attempts under way, by gateway. An attempt that is no longer here was
	// cancelled by the search.
	attempts  map[string]*remoteAttempt
	queue     []string // gateways to try, one per stagger
	nextStart time.Time
	stagger   *time.Timer
	lastErr   error

	// What the search knows of the agent not serving the method (see unservedEverywhere): the tracker's
	// newest list, the local wait's verdict, and the gateways that answered with theirs.
	listed        []string
	haveList      bool
	verdicts      chan bool
	localUnserved bool
	unserved      map[string]error
}

// end cancels the attempts still under way; those that find something later give it back.
func (s *search) end() {
	s.stagger.Stop()
	for _, a := range s.attempts {
		a.cancel()
	}
	close(s.abandoned)
}

func (s *search) deliver(r attemptResult) {
	select {
	case s.results <- r:
	case <-s.abandoned:
		if r.gw != nil {
			r.gw.Release()
		}
	}
}

// waitLocal waits for a tunnel of this kas, and passes on the verdict of a watch on whether the agent
// is connected here without the method; unlike a kas alone, it goes on waiting, as other kas may serve
// the method or the verdict may change.
func (s *search) waitLocal(h registry.Handle) {
	wctx, cancel := context.WithCancel(s.findCtx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if s.f.cfg.UnservedGrace > 0 {
			presence.WatchUnserved(wctx, s.f.cfg.Registry, s.req.watched(), s.f.cfg.UnservedGrace, func(u bool) {
				select {
				case s.verdicts <- u:
				case <-s.abandoned:
				}
			})
		}
	}()
	t, err := h.Get(s.findCtx)
	cancel()
	<-watched
	if err != nil {
		h.Done()
		s.deliver(attemptResult{err: err})
		return
	}
	s.deliver(attemptResult{gw: &localGateway{handle: h, tunnel: t}})
}

// update takes the tracker's newest list: attempts on gateways no longer listed are cancelled, new ones
// are queued.
func (s *search) update(urls []string) {
	for u, a := range s.attempts {
		if !slices.Contains(urls, u) {
			a.cancel() // the gateway vanished from the tracker
			delete(s.attempts, u)
		}
	}
	s.listed, s.haveList = urls, true
	for _, u := range urls {
		if u == s.f.cfg.SelfURL || s.attempts[u] != nil || s.unserved[u] != nil || slices.Contains(s.queue, u) || s.f.backingOff(u) {
			continue
		}
		s.queue = append(s.queue, u)
	}
	s.schedule()
}

func (s *search) schedule() {
	if len(s.queue) == 0 {
		return
	}
	s.stagger.Reset(max(time.Until(s.nextStart), 0))
}

// startNext starts an attempt on the next queued gateway.
func (s *search) startNext() {
	if len(s.queue) == 0 {
		return
	}
	u := s.queue[0]
	s.queue = s.queue[1:]
	actx, acancel := context.WithCancel(s.ctx)
	att := &remoteAttempt{cancel: acancel}
	s.attempts[u] = att
	go func() {
		cs, err := s.f.attempt(actx, s.findCtx, u, s.req)
		if err != nil {
			acancel()
			s.deliver(attemptResult{url: u, att: att, err: err})
			return
		}
		eager, hop := eagerOK(cs)
		s.deliver(attemptResult{gw: &remoteGateway{stream: cs, cancel: acancel, url: u, eager: eager, hop: hop}, url: u, att: att})
	}()
	s.nextStart = time.Now().Add(s.f.cfg.Stagger)
	s.schedule()
}

// result takes the end of one attempt; over reports that the search is over with gw or err.
func (s *search) result(r attemptResult) (over bool, gw Gateway, err error) {
	if r.url != "" {
		if s.attempts[r.url] != r.att {
			// The search cancelled the attempt (its gateway left the tracker): whatever it got, its stream
			// is dead, and its end is no failure of the gateway.
			if r.gw != nil {
				r.gw.Release()
			}
			return false, nil, nil
		}
		delete(s.attempts, r.url) // a winner's stream must survive end's cancels
	}
	var gu *gatewayUnservedError
	switch {
	case r.err == nil:
		if r.url != "" {
			s.f.succeeded(r.url)
			if rg, ok := r.gw.(*remoteGateway); ok && rg.eager && s.f.lastGW != nil {
				s.f.lastGW.remember(s.req.AgentID, r.url, rg.hop)
			}
		}
		return true, r.gw, nil
	case r.url != "" && errors.As(r.err, &gu):
		// A healthy gateway whose tunnels of the agent lack the method: no backoff, no second try.
		s.unserved[r.url] = gu.err
		if err := s.unservedEverywhere(); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	case r.url == "":
		// The local wait ended without a tunnel: kas is shutting down, or the find is over.
		return s.findCtx.Err() == nil, nil, r.err
	case s.findCtx.Err() == nil:
		s.f.failed(r.url)
		s.lastErr = r.err
		s.f.cfg.Log.Debug("gateway attempt failed", "agent_id", s.req.AgentID, "gateway", r.url, "err", r.err)
	}
	return false, nil, nil
}

// timedOut is the search's error once findCtx is over.
func (s *search) timedOut() error {
	if s.ctx.Err() != nil {
		return status.FromContextError(s.ctx.Err()).Err()
	}
	if s.lastErr != nil {
		s.f.cfg.Log.Debug("no gateway in time", "agent_id", s.req.AgentID, "last_err", s.lastErr)
	}
	return &findTimeoutError{timeout: s.req.FindTimeout}
}

// findErr is why a wait on this kas's tunnels ended: the caller's end as its status, the find timeout, or
// err (kas is shutting down).
func findErr(ctx, findCtx context.Context, req FindRequest, err error) error {
	switch {
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case findCtx.Err() != nil:
		return &findTimeoutError{timeout: req.FindTimeout}
	default:
		return err
	}
}

func (f *Finder) backingOff(u string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.backoff[u]
	return b != nil && time.Now().Before(b.until)
}

func (f *Finder) failed(u string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.backoff[u]
	if b == nil {
		b = &gatewayBackoff{next: f.cfg.BackoffMin}
		f.backoff[u] = b
	} else {
		b.next = min(b.next*2, f.cfg.BackoffMax)
	}
	b.until = time.Now().Add(b.next)
}

func (f *Finder) succeeded(u string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.backoff, u)
}

// attempt asks one gateway for a tunnel: it opens the private API stream (which lives as long as ctx),
// waits for tunnel_ready (at most until findCtx ends) and sends StartStreaming.
func (f *Finder) attempt(ctx, findCtx context.Context, u string, req FindRequest) (grpc.ClientStream, error) {
	conn, err := f.cfg.Dialer.Conn(u)
	if err != nil {
		return nil, err
	}
	md := call.ToGateway(req.Metadata)
	md.Delete(rpc.GatewayEagerKey) // a caller's own never makes a stream eager
	streamCtx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, md))
	// The stream outlives the find: it carries the call afterwards. Only a find that ends first cancels it.
	stop := context.AfterFunc(findCtx, cancel)
	ok := false
	defer func() {
		if !ok {
			stop()
			cancel()
		}
	}()
	stream, err := conn.NewStream(streamCtx, grpctool.BidiStreamDesc, req.FullMethod, grpctool.RawCallCodec())
	if err != nil {
		return nil, err
	}
	checker := rpc.NewChecker(rpc.GatewayToRouting)
	for {
		var m rpc.GatewayResponse
		if err := stream.RecvMsg(&m); err != nil {
			if err == io.EOF {
				return nil, status.Error(codes.Unavailable, "gateway kas ended the stream before it had a tunnel")
			}
			if len(stream.Trailer().Get(rpc.GatewayUnservedTrailerKey)) > 0 {
				return nil, &gatewayUnservedError{err: err}
			}
			return nil, err
		}
		if err := checker.Next(rpc.GatewayState(&m)); err != nil {
			return nil, status.Errorf(codes.Unavailable, "gateway kas broke the protocol: %v", status.Convert(err).Message())
		}
		if checker.State() == rpc.StateTunnelReady {
			break
		}
	}
	if !stop() {
		return nil, findCtx.Err() // the find ended as the tunnel became ready
	}
	if err := stream.SendMsg(&rpc.StartStreaming{}); err != nil {
		return nil, err
	}
	ok = true
	context.AfterFunc(ctx, cancel)
	return stream, nil
}

// SetSelfURL sets this kas's private URL once it is known (after listening); set it before use.
func (f *Finder) SetSelfURL(u string) {
	f.cfg.SelfURL = u
}
