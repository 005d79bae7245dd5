package registry

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
)

// DefaultRegistryStripes is the number of independently locked parts of the registry. Agents are spread
// over them by id, so calls for different agents rarely contend.
const DefaultRegistryStripes = 64

var errShuttingDown = status.Error(codes.Unavailable, "kas is shutting down")

// Registry matches calls waiting for a tunnel with idle tunnels, in both directions: a call that finds no
// idle tunnel waits for one, a new idle tunnel serves the oldest waiting call it can serve.
type Registry struct {
	stripes []stripe
	log     *slog.Logger
	// onAgent is told when an agent gets its first tunnel here (true) and loses its last one (false).
	onAgent func(agentID int64, connected bool)
	limits  Limits
	onLimit tunserver.OnLimit

	idle    atomic.Int64
	busy    atomic.Int64
	waiting atomic.Int64
	agents  atomic.Int64
	pending atomic.Int64
	closing atomic.Int64
	// opened counts tunnels admitted; reused counts calls after which a tunnel went back to idle.
	opened  atomic.Int64
	reused  atomic.Int64
	batched atomic.Int64
}

type stripe struct {
	mu      sync.Mutex
	agents  map[int64]*agentEntry
	stopped bool
}

type agentEntry struct {
	// idle tunnels, newest last. The newest is used first, so that tunnels the agent does not need stay
	// idle long enough for the agent to close them.
	idle []*Tunnel
	// waiting calls, oldest first: calls are served first in, first out.
	waiting []*findRequest
	// tunnels that are not done, in any state.
	tunnels int
	// pending are Connect streams of the agent that were admitted but have not sent their descriptor
	// yet: they count against MaxTunnelsPerAgent from the start, so that streams which never finish
	// their handshake cannot pile up uncounted.
	pending int
	// closing are tunnels that ended but whose agent has not closed the stream yet (see readInline):
	// they count against MaxTunnelsPerAgent until it does, so that an agent that ignores kas's
	// EndTunnel holds no more than its limit.
	closing int
	// descs are the descriptors of the tunnels counted in tunnels (see Presence).
	descs descriptor.Set
}

type findRequest struct {
	service, method string
	// ch receives exactly one found tunnel, or is closed with err set when the registry stops.
	ch  chan *Tunnel
	err error
}

// New returns an empty registry. stripes <= 0 means DefaultRegistryStripes.
func New(log *slog.Logger, stripes int) *Registry {
	if stripes <= 0 {
		stripes = DefaultRegistryStripes
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{stripes: make([]stripe, stripes), log: log}
	for i := range r.stripes {
		r.stripes[i].agents = make(map[int64]*agentEntry)
	}
	return r
}

// Limits bound what one agent can make kas hold. Zero means no limit.
type Limits struct {
	// MaxTunnelsPerAgent bounds the tunnels (in any state) of one agent on this kas.
	MaxTunnelsPerAgent int
	// MaxWaitingPerAgent bounds the calls waiting for a tunnel of one agent: more fail at once with
	// ResourceExhausted instead of queueing without bound.
	MaxWaitingPerAgent int
	// MaxWaiting bounds the calls waiting for a tunnel on this kas, whatever their agent: agent ids are
	// the caller's to choose, so a per-agent bound alone does not bound the whole.
	MaxWaiting int
}

// SetLimits sets the registry's limits and the function told when one bites (it runs under a registry
// lock: it must return at once). Set them before the registry is used.
func (r *Registry) SetLimits(l Limits, onLimit tunserver.OnLimit) {
	r.limits, r.onLimit = l, onLimit
}

// LimitHit reports a limit that bit to the registry's OnLimit, for the parts that serve its tunnels.
func (r *Registry) LimitHit(limit string) { r.onLimit.Hit(limit) }

// OnAgent sets the function told when an agent gets its first tunnel on this kas (connected) and when it
// loses its last one. It runs under a registry lock: it must return at once (hand the news to a
// goroutine), never wait for I/O. Set it before the registry is used.
func (r *Registry) OnAgent(f func(agentID int64, connected bool)) {
	r.onAgent = f
}

func (r *Registry) stripe(agentID int64) *stripe {
	return &r.stripes[uint64(agentID)%uint64(len(r.stripes))]
}

// Stats are the registry's gauges.
type Stats struct {
	IdleTunnels     int64
	BusyTunnels     int64
	WaitingCalls    int64
	ConnectedAgents int64
	// PendingTunnels are Connect streams admitted that have not sent their descriptor yet.
	PendingTunnels int64
	// ClosingTunnels are tunnels kas ended by asking the agent (rpc.EndTunnel) whose stream the agent
	// has not closed yet: a few for a moment at most, unless an agent ignores EndTunnel.
	ClosingTunnels int64
}

// Counts are the registry's counters since it started.
type Counts struct {
	// TunnelsOpened is how many tunnels agents opened (their descriptor accepted).
	TunnelsOpened int64
	// TunnelsReused is how many times a reusable tunnel went back to idle after a call.
	TunnelsReused int64
	// TunnelsBatched is how many of the opened tunnels carry batches (agent and kas both take them).
	TunnelsBatched int64
}

// Counts returns the counters.
func (r *Registry) Counts() Counts {
	return Counts{TunnelsOpened: r.opened.Load(), TunnelsReused: r.reused.Load(), TunnelsBatched: r.batched.Load()}
}

// Stats returns the current gauges.
func (r *Registry) Stats() Stats {
	return Stats{
		IdleTunnels:     r.idle.Load(),
		BusyTunnels:     r.busy.Load(),
		WaitingCalls:    r.waiting.Load(),
		ConnectedAgents: r.agents.Load(),
		PendingTunnels:  r.pending.Load(),
		ClosingTunnels:  r.closing.Load(),
	}
}

// FindHandle is a call's claim on a tunnel. Callers must always call Done, whether or not Get returned a
// tunnel: Done gives back a tunnel that was found but never used, and withdraws a call still waiting.
type FindHandle struct {
	reg     *Registry
	agentID int64
	req     *findRequest
	tunnel  *Tunnel
	// owner is what the tunnel was found for: this handle, or its request in line.
	owner any
	err   error
}

// Handle is a call's claim on a tunnel, as FindTunnel returns it. Callers must always call Done,
// whether or not Get returned a tunnel.
type Handle interface {
	// Get returns the tunnel, waiting for one if none was available at once.
	Get(ctx context.Context) (Forwarder, error)
	Done()
}

// Forwarder carries one call over a tunnel of this kas: a *Tunnel.
type Forwarder interface {
	Forward(ctx context.Context, pump *request.Pump, sink Sink) error
	AgentID() int64
	OneRequest(service, method string) bool
}

// FindTunnel looks for an idle tunnel of the agent that serves the method. found reports whether one was
// available at once; otherwise the call waits in line and Get blocks until a tunnel arrives.
func (r *Registry) FindTunnel(agentID int64, service, method string) (found bool, _ Handle) {
	h := &FindHandle{reg: r, agentID: agentID}
	s := r.stripe(agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		h.err = errShuttingDown
		return false, h
	}
	e := s.agents[agentID]
	if e != nil {
		for i := len(e.idle) - 1; i >= 0; i-- {
			t := e.idle[i]
			if !t.desc.Supports(service, method) {
				continue
			}
			e.idle = slices.Delete(e.idle, i, i+1)
			if !r.claimLocked(t, h) {
				continue
			}
			h.tunnel, h.owner = t, h
			return true, h
		}
	} else {
		e = &agentEntry{}
		s.agents[agentID] = e
	}
	if max := r.limits.MaxWaitingPerAgent; max > 0 && len(e.waiting) >= max {
		r.onLimit.Hit(tunserver.LimitWaitingPerAgent)
		h.err = status.Errorf(codes.ResourceExhausted, "%d calls already wait for a tunnel to agent %d, the limit (--max-waiting-calls-per-agent) is %d", len(e.waiting), agentID, max)
		r.forgetIfEmptyLocked(s, agentID, e)
		return false, h
	}
	if err := r.admitWaiting(); err != nil {
		h.err = err
		r.forgetIfEmptyLocked(s, agentID, e)
		return false, h
	}
	h.req = &findRequest{service: service, method: method, ch: make(chan *Tunnel, 1)}
	h.owner = h.req
	e.waiting = append(e.waiting, h.req)
	return false, h
}

// admitWaiting counts one more waiting call unless kas already holds MaxWaiting. The count is taken
// before the call joins a line (compare-and-swap, as the stripes lock separately), so concurrent calls
// never push it past the bound.
func (r *Registry) admitWaiting() error {
	max := int64(r.limits.MaxWaiting)
	for {
		n := r.waiting.Load()
		if max > 0 && n >= max {
			r.onLimit.Hit(tunserver.LimitWaiting)
			return status.Errorf(codes.ResourceExhausted, "%d calls already wait for a tunnel on this kas, the limit (--max-waiting-calls) is %d", n, max)
		}
		if r.waiting.CompareAndSwap(n, n+1) {
			return nil
		}
	}
}

// Get returns the tunnel, waiting for one if none was available at once. It returns ctx's error when ctx
// ends first, and an Unavailable status when kas is shutting down.
func (h *FindHandle) Get(ctx context.Context) (Forwarder, error) {
	if h.tunnel != nil || h.err != nil {
		return h.tunnelOrNil(), h.err
	}
	select {
	case t, ok := <-h.req.ch:
		h.req = nil
		if !ok {
			h.err = errShuttingDown
			return nil, h.err
		}
		h.tunnel = t
		return t, nil
	case <-ctx.Done():
		h.cancel()
		return nil, ctx.Err()
	}
}

// tunnelOrNil keeps a nil *Tunnel from becoming a non-nil Forwarder.
func (h *FindHandle) tunnelOrNil() Forwarder {
	if h.tunnel == nil {
		return nil
	}
	return h.tunnel
}

// Break ends a found tunnel as if its stream had broken before the call started: tests use it to make
// that race happen on purpose.
func (r *Registry) Break(f Forwarder) {
	if t, ok := f.(*Tunnel); ok {
		r.onReaderResult(t, recvResult{err: io.ErrUnexpectedEOF})
	}
}

// cancel takes the call out of line. A tunnel that arrived at the same moment is kept so that Done gives
// it back.
func (h *FindHandle) cancel() {
	if h.req == nil {
		return
	}
	req := h.req
	h.req = nil
	s := h.reg.stripe(h.agentID)
	s.mu.Lock()
	if e := s.agents[h.agentID]; e != nil {
		if i := slices.Index(e.waiting, req); i >= 0 {
			e.waiting = slices.Delete(e.waiting, i, i+1)
			h.reg.waiting.Add(-1)
			h.reg.forgetIfEmptyLocked(s, h.agentID, e)
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	// Not in line any more: a tunnel was delivered (the channel holds it), or the registry stopped.
	select {
	case t, ok := <-req.ch:
		if ok {
			h.tunnel = t
		}
	default:
	}
}

// Done releases the handle: a found tunnel that was never used goes back to the registry, a waiting call
// leaves the line. It is safe to call more than once.
func (h *FindHandle) Done() {
	h.cancel()
	if t := h.tunnel; t != nil {
		h.tunnel = nil
		h.reg.giveBack(t, h.owner)
	}
}

// Reserve admits a Connect stream of the agent before its handshake: it counts against
// MaxTunnelsPerAgent from now on, as a pending tunnel. Every reservation ends in addTunnel or in
// CancelReservation.
func (r *Registry) Reserve(agentID int64) error {
	s := r.stripe(agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errShuttingDown
	}
	e := s.agents[agentID]
	if e == nil {
		e = &agentEntry{}
		s.agents[agentID] = e
	}
	if max := r.limits.MaxTunnelsPerAgent; max > 0 && e.tunnels+e.pending+e.closing >= max {
		r.onLimit.Hit(tunserver.LimitTunnelsPerAgent)
		err := status.Errorf(codes.ResourceExhausted, "agent %d already has %d tunnels on this kas (%d of them still in their handshake, %d ended but not yet closed by the agent), the limit (--max-tunnels-per-agent) is %d", agentID, e.tunnels+e.pending+e.closing, e.pending, e.closing, max)
		r.forgetIfEmptyLocked(s, agentID, e)
		return err
	}
	e.pending++
	r.pending.Add(1)
	return nil
}

// CancelReservation gives back the reservation of a stream whose handshake failed.
func (r *Registry) CancelReservation(agentID int64) {
	s := r.stripe(agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.agents[agentID]; e != nil && e.pending > 0 {
		e.pending--
		r.pending.Add(-1)
		r.forgetIfEmptyLocked(s, agentID, e)
	}
}

// addTunnel turns the agent's reservation (see Reserve) into a tunnel: it serves the oldest
// waiting call that it can serve, or waits idle. It fails only when the registry has stopped; the
// reservation is gone either way.
func (r *Registry) addTunnel(t *Tunnel) error {
	s := r.stripe(t.agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.agents[t.agentID]
	if e == nil || e.pending == 0 {
		// Not reached: AgentAPI reserves first. Refuse rather than hold an uncounted tunnel.
		return status.Errorf(codes.Internal, "tunnel of agent %d added without a reservation", t.agentID)
	}
	e.pending--
	r.pending.Add(-1)
	if s.stopped {
		r.forgetIfEmptyLocked(s, t.agentID, e)
		return errShuttingDown
	}
	e.tunnels++
	e.descs.Add(t.desc)
	r.opened.Add(1)
	if t.out.Batches {
		r.batched.Add(1)
	}
	if e.tunnels == 1 {
		r.agents.Add(1)
		r.log.Debug("agent connected", "agent_id", t.agentID)
		if r.onAgent != nil {
			r.onAgent(t.agentID, true)
		}
	}
	t.mu.Lock()
	t.state = TunnelIdle
	t.mu.Unlock()
	r.idle.Add(1)
	r.placeLocked(e, t)
	return nil
}

// placeLocked gives an idle tunnel to the oldest waiting call it can serve, or adds it to the idle list.
// s.mu must be held; t must be idle and counted in r.idle.
func (r *Registry) placeLocked(e *agentEntry, t *Tunnel) {
	for i, req := range e.waiting {
		if !t.desc.Supports(req.service, req.method) {
			continue
		}
		e.waiting = slices.Delete(e.waiting, i, i+1)
		r.waiting.Add(-1)
		if r.claimLocked(t, req) {
			req.ch <- t // buffered, never blocks: each request gets one tunnel
		}
		return
	}
	e.idle = append(e.idle, t)
}

// claimLocked moves an idle tunnel to found for owner (a FindHandle, or a waiting call's request), so
// that only that claim may give it back. The stripe lock must be held.
func (r *Registry) claimLocked(t *Tunnel, owner any) bool {
	t.mu.Lock()
	err := t.moveLocked(TunnelFound)
	if err == nil {
		t.owner = owner
	}
	t.mu.Unlock()
	if err != nil {
		r.log.Error("registry invariant broken", "err", err)
		return false
	}
	r.idle.Add(-1)
	r.busy.Add(1)
	return true
}

// giveBack returns a found tunnel that was not used. It goes back to idle unless it broke, expired or kas
// is stopping, in which case it ends. owner is the claim the tunnel was found for: a reusable tunnel that
// carried the call and went back to idle may since have been found for another call, which keeps it.
func (r *Registry) giveBack(t *Tunnel, owner any) {
	s := r.stripe(t.agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	t.mu.Lock()
	if t.state != TunnelFound || t.owner != owner {
		t.mu.Unlock()
		return // already forwarding, done, or another call's: nothing to give back
	}
	r.backToIdleLocked(s, t, t.early != nil, earlyErr(t))
}

// backToIdleLocked returns a busy tunnel (found or forwarding) to idle, where it serves the oldest
// waiting call it can. A tunnel that broke, expired, or belongs to a stopping kas ends instead, with
// endErr. The stripe lock and t.mu must be held; t.mu is released.
func (r *Registry) backToIdleLocked(s *stripe, t *Tunnel, broken bool, endErr error) bool {
	if broken || t.expired || s.stopped {
		reason := t.endReason
		if s.stopped && reason == "" {
			reason = rpc.EndReasonShutdown
		}
		t.mu.Unlock()
		r.finishLocked(s, t, endErr, reason)
		return false
	}
	err := t.moveLocked(TunnelIdle)
	t.mu.Unlock()
	if err != nil {
		r.log.Error("registry invariant broken", "err", err)
		return false
	}
	r.busy.Add(-1)
	r.idle.Add(1)
	r.placeLocked(s.agents[t.agentID], t)
	return true
}

// finish ends the tunnel with err (returned to the agent as the Connect status) and reason (sent in the
// rpc.TunnelEndReasonKey trailer). Ending a tunnel that has already ended does nothing.
func (r *Registry) finish(t *Tunnel, err error, reason string) {
	s := r.stripe(t.agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.finishLocked(s, t, err, reason)
}

func (r *Registry) finishLocked(s *stripe, t *Tunnel, err error, reason string) {
	t.mu.Lock()
	from := t.state
	if from == TunnelDone {
		t.mu.Unlock()
		return
	}
	t.endErr = err
	if reason != "" {
		t.endReason = reason
	}
	if moveErr := t.moveLocked(TunnelDone); moveErr != nil {
		t.mu.Unlock()
		r.log.Error("registry invariant broken", "err", moveErr)
		return
	}
	endReason := t.endReason
	t.mu.Unlock()
	e := s.agents[t.agentID]
	if t.agentEnds {
		// The handler is reading the stream: only the agent can end it now.
		t.out.End(rpc.EndTunnelMessage(endReason, handlerStatus(err)))
		if e != nil {
			e.closing++
			r.closing.Add(1)
			t.closing = true
		}
	}
	switch from {
	case TunnelIdle:
		r.idle.Add(-1)
		if e != nil {
			if i := slices.Index(e.idle, t); i >= 0 {
				e.idle = slices.Delete(e.idle, i, i+1)
			}
		}
	case TunnelFound, TunnelForwarding:
		r.busy.Add(-1)
	}
	if e != nil {
		e.tunnels--
		e.descs.Remove(t.desc)
		if e.tunnels == 0 {
			r.agents.Add(-1)
			r.log.Debug("agent disconnected", "agent_id", t.agentID)
			if r.onAgent != nil {
				r.onAgent(t.agentID, false)
			}
		}
		r.forgetIfEmptyLocked(s, t.agentID, e)
	}
}

// streamClosed gives back the place of a tunnel whose agent closed its stream after it ended.
func (r *Registry) streamClosed(t *Tunnel) {
	s := r.stripe(t.agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !t.closing {
		return
	}
	t.closing = false
	r.closing.Add(-1)
	if e := s.agents[t.agentID]; e != nil {
		e.closing--
		r.forgetIfEmptyLocked(s, t.agentID, e)
	}
}

func (r *Registry) forgetIfEmptyLocked(s *stripe, agentID int64, e *agentEntry) {
	if e.tunnels == 0 && e.pending == 0 && e.closing == 0 && len(e.waiting) == 0 {
		delete(s.agents, agentID)
	}
}

// expire ends an idle tunnel because of reason; a tunnel in use ends after its call instead of going back
// to idle.
func (r *Registry) expire(t *Tunnel, reason string) {
	s := r.stripe(t.agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	t.mu.Lock()
	switch t.state {
	case TunnelIdle:
		t.mu.Unlock()
		r.finishLocked(s, t, nil, reason)
	case TunnelFound, TunnelForwarding:
		t.expired = true
		t.endReason = reason
		t.mu.Unlock()
	default:
		t.mu.Unlock()
	}
}

// agentEndedCall takes the agent's call_end on a reusable tunnel: the reader no longer passes anything
// to the call, and the tunnel goes back to idle if kas ended the call too.
func (r *Registry) agentEndedCall(t *Tunnel, fwd *forwarding) {
	t.mu.Lock()
	if t.fwd == fwd {
		t.fwd = nil
	}
	t.mu.Unlock()
	if fwd.ends.Add(1) == 2 {
		r.afterCall(t, fwd)
	}
}

// afterCall returns a reusable tunnel whose call ended on both sides to idle, without a new descriptor:
// it serves the oldest waiting call it can, or waits. A tunnel past its max connection age, or on a
// stopping kas, ends instead (cleanly: the agent reconnects).
func (r *Registry) afterCall(t *Tunnel, fwd *forwarding) {
	if fwd.drainTimer != nil {
		fwd.drainTimer.Stop()
	}
	s := r.stripe(t.agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	t.mu.Lock()
	if t.state != TunnelForwarding {
		t.mu.Unlock()
		return // the tunnel ended meanwhile
	}
	t.fwd = nil
	if r.backToIdleLocked(s, t, false, nil) {
		r.reused.Add(1)
	}
}

// onReaderResult handles what the stream reader got while it had no call to pass it to. It returns the
// call instead when the tunnel carries one (forwarding, or done after forwarding): the result is the
// call's.
func (r *Registry) onReaderResult(t *Tunnel, res recvResult) *forwarding {
	s := r.stripe(t.agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	t.mu.Lock()
	if t.fwd != nil {
		fwd := t.fwd
		t.mu.Unlock()
		return fwd
	}
	switch t.state {
	case TunnelIdle:
		t.mu.Unlock()
		r.finishLocked(s, t, idleResultErr(res), "")
	case TunnelFound:
		t.early = &res
		t.mu.Unlock()
	case TunnelForwarding:
		// A reusable tunnel between the agent's call_end and kas's: nothing may come but the end.
		t.mu.Unlock()
		err := idleResultErr(res)
		if res.msg != nil {
			err = status.Errorf(codes.InvalidArgument, "agent->kas reusable tunnel: %s after the agent's call_end, before kas's", rpc.AgentState(res.msg))
		}
		r.finishLocked(s, t, err, "")
	default:
		t.mu.Unlock()
	}
	return nil
}

// Stop makes every waiting call fail with Unavailable "kas is shutting down", ends every idle tunnel so
// that its agent reconnects (to another kas), and refuses new tunnels and calls. Tunnels in use end after
// their call.
func (r *Registry) Stop() {
	for i := range r.stripes {
		s := &r.stripes[i]
		s.mu.Lock()
		s.stopped = true
		for id, e := range s.agents {
			for _, req := range e.waiting {
				req.err = errShuttingDown
				close(req.ch)
			}
			r.waiting.Add(-int64(len(e.waiting)))
			e.waiting = nil
			for _, t := range slices.Clone(e.idle) {
				r.finishLocked(s, t, nil, rpc.EndReasonShutdown)
			}
			if e.tunnels == 0 && e.pending == 0 && e.closing == 0 {
				delete(s.agents, id)
			}
		}
		s.mu.Unlock()
	}
}
