package tunclient

import (
	"context"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient/reconnect"
)

// connState is where one pool goroutine is.
type connState int

const (
	connConnecting connState = iota
	connIdle
	connBusy
	// connClosing: the tunnel was withdrawn and waits for kas to end it.
	connClosing
	numConnStates
)

// pool keeps MinIdle tunnels idle, opens ScaleUpStep more when idle tunnels run short (up to
// MaxConnections) and closes tunnels above the minimum that stayed idle for MaxIdleTime. Each tunnel has
// one goroutine that reconnects it after it ends.
type pool struct {
	a   *Agent
	cfg *Config

	// hardCtx is cancelled only when Stop's grace ends: it aborts calls in flight.
	hardCtx    context.Context
	hardCancel context.CancelFunc
	stopCh     chan struct{}

	mu     sync.Mutex
	counts [numConnStates]int
	total  int
	// spawned: goroutines started by spawnLocked whose first tunnel is not idle yet.
	spawned  int
	stopping bool
	idle     map[*conn]struct{}
	// reconnectAt is when tunnels ended by a kas shutdown reconnect (see shutdownWait).
	reconnectAt time.Time

	// callOpts are the options of every tunnel stream, built once.
	callOpts []grpc.CallOption
	// connLog says, rate-limited, why tunnels cannot connect and when they retry.
	connLog *reconnect.Log

	wg sync.WaitGroup
}

// idleTimer is what the pool needs of a *time.Timer started by time.AfterFunc: the MaxIdleTime timer of
// an idle tunnel.
type idleTimer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// afterFunc starts an idleTimer that calls f after d, in its own goroutine: time.AfterFunc.
func afterFunc(d time.Duration, f func()) idleTimer {
	return time.AfterFunc(d, f)
}

// conn is one pool goroutine and its current tunnel. Its fields are guarded by pool.mu.
type conn struct {
	state connState
	// fresh: the goroutine's first tunnel has not been idle yet; it counts in pool.spawned.
	fresh     bool
	stream    rpc.ReverseTunnel_ConnectClient
	timer     idleTimer
	busy      bool
	withdrawn bool
	// exit: the goroutine ends after the withdrawn tunnel is drained (reaped, or the agent stops).
	exit bool
	// connected: a tunnel of this goroutine became idle since its last backoff (a successful dial);
	// err: why its last tunnel failed. Both are the goroutine's own.
	connected bool
	err       error
}

func newPool(a *Agent) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	max := a.cfg.MaxMessageSize + tunnelOverhead
	return &pool{
		callOpts:   []grpc.CallOption{grpc.MaxCallRecvMsgSize(max), grpc.MaxCallSendMsgSize(max), grpctool.RawCallCodec()},
		a:          a,
		cfg:        &a.cfg,
		hardCtx:    ctx,
		hardCancel: cancel,
		stopCh:     make(chan struct{}),
		idle:       make(map[*conn]struct{}),
		connLog:    reconnect.NewLog(a.cfg.Log, a.cfg.connectLogInterval),
	}
}

func (p *pool) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spawnLocked(p.cfg.MinIdle)
}

func (p *pool) spawnLocked(n int) {
	for i := 0; i < n && p.total < p.cfg.MaxConnections; i++ {
		p.total++
		p.counts[connConnecting]++
		p.spawned++
		p.wg.Add(1)
		go p.run()
	}
}

func (p *pool) stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Connecting: p.counts[connConnecting], Idle: p.counts[connIdle], Busy: p.counts[connBusy]}
}

// moveLocked changes one goroutine's state in the counts and metrics.
func (p *pool) moveLocked(c *conn, to connState) {
	p.counts[c.state]--
	p.counts[to]++
	c.state = to
}

// scaleUpLocked opens tunnels when fewer than MinIdle are idle or newly opening: as many as are missing,
// or a quarter of the busy ones when calls pile up, at most ScaleUpStep at once. An agent with an
// occasional call keeps MinIdle+1 tunnels; one under a burst grows by a quarter per round trip.
// Tunnels reconnecting after their call do not count as on their way: under steady load all of them
// are, briefly, and counting them would stop the pool from growing while calls wait at kas for a tunnel.
func (p *pool) scaleUpLocked() {
	if p.stopping {
		return
	}
	missing := p.cfg.MinIdle - (p.counts[connIdle] + p.spawned)
	if missing > 0 {
		p.spawnLocked(min(p.cfg.ScaleUpStep, max(missing, p.counts[connBusy]/4)))
	}
}

// shutdownWait is how long a tunnel that kas ended for shutdown waits before it reconnects. The wait is
// drawn once per agent and shutdown, not per tunnel: with one draw per tunnel the earliest of many
// would cluster near zero, and agents would still stampede the surviving kas.
func (p *pool) shutdownWait() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if !p.reconnectAt.After(now) {
		p.reconnectAt = now.Add(reconnect.UpTo(p.cfg.ShutdownReconnectJitter))
	}
	return p.reconnectAt.Sub(now)
}

func (p *pool) exit(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[c.state]--
	p.total--
	if c.fresh {
		p.spawned--
	}
	// A tunnel that broke may have left fewer idle tunnels than the minimum.
	p.scaleUpLocked()
}

// tunnelEnd is how one tunnel ended, which decides what its goroutine does next.
type tunnelEnd int

const (
	endClean    tunnelEnd = iota // reconnect at once
	endShutdown                  // reconnect after a random delay
	endError                     // reconnect after backoff
	endExit                      // the goroutine ends
)

func (p *pool) run() {
	defer p.wg.Done()
	b := reconnect.NewState(p.cfg.Backoff)
	c := &conn{state: connConnecting, fresh: true}
	for {
		end := p.serveTunnel(c)
		if c.connected {
			// The connection worked: a failure after it starts a new outage, not a longer one.
			c.connected = false
			b.Reset()
		}
		var wait time.Duration
		switch end {
		case endExit:
			p.exit(c)
			return
		case endClean:
			b.Reset()
		case endShutdown:
			b.Reset()
			wait = p.shutdownWait()
		case endError:
			wait = b.Wait()
			p.connLog.Failed(c.err, wait)
		}
		if !p.pause(wait) {
			p.exit(c)
			return
		}
		if end == endError {
			p.redial()
		}
	}
}

// redial makes the connection to kas dial now if it is waiting out gRPC's own reconnect backoff: the
// pool's backoff alone decides when the agent tries again, so that it is back within one pool wait of
// kas (6.5 s after a 15 s outage without this, the two backoffs adding up).
func (p *pool) redial() {
	if c, ok := p.cfg.KasConn.(interface{ ResetConnectBackoff() }); ok {
		c.ResetConnectBackoff()
	}
}

// pause waits d, or less when the agent stops; it reports whether to go on.
func (p *pool) pause(d time.Duration) bool {
	if d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-p.stopCh:
			return false
		}
	}
	select {
	case <-p.stopCh:
		return false
	default:
		return true
	}
}

// serveTunnel opens one tunnel, waits idle for a call and serves it; a reusable tunnel then waits for
// the next call. c is connecting on entry, and connecting or closing on return.
func (p *pool) serveTunnel(c *conn) tunnelEnd {
	streamCtx, cancel := context.WithCancel(p.hardCtx)
	defer cancel()
	stream, err := rpc.NewReverseTunnelClient(p.cfg.KasConn).Connect(streamCtx, p.callOpts...)
	if err != nil {
		return p.failed(c, err)
	}
	if p.a.offersBatches() {
		// kas may batch from its first message on, once it accepted the offer.
		stream = &rpc.BatchedConnectClient{ReverseTunnel_ConnectClient: stream}
	}
	if p.a.endsOnRequest() {
		// kas's EndTunnel may come in a batch: it is taken after the batch is unpacked.
		stream = &rpc.EndingConnectClient{ReverseTunnel_ConnectClient: stream, Cancel: cancel}
	}
	// The descriptor was encoded once, at Start.
	if err := stream.SendMsg(&grpctool.RawFrame{Data: p.a.descriptorMsg}); err != nil {
		_, err = stream.Recv() // the real error is the stream's status
		return p.failed(c, err)
	}
	tc := tunnelCall{stream: stream, cancelStream: cancel, drain: p.cfg.DrainTimeout}
	var opened time.Time
	for calls := 0; ; calls++ {
		p.becomeIdle(c, stream)
		if calls == 0 {
			opened = time.Now()
			if p.connLog.Failing() {
				// An idle tunnel hears nothing from kas: one that is not refused at once was accepted.
				confirm := time.AfterFunc(acceptedAfter, p.connLog.Connected)
				defer confirm.Stop()
			}
		}
		rpc.AwaitReceived(stream) // idle: on a shallow stack
		msg, err := stream.Recv()
		if calls == 0 && (err == nil || time.Since(opened) >= acceptedAfter) {
			c.connected = true
			if err == nil {
				p.connLog.Connected() // not when it broke: that is no news of being back
			}
		}
		serve, withdrawn, exit := p.leaveIdle(c, err == nil && msg.GetRequestInfo() != nil)
		if !serve {
			return p.notServed(c, stream, cancel, msg, err, withdrawn, exit)
		}
		if calls == 0 {
			// kas's answer to the descriptor's request for reuse came with its first message.
			tc.reuse = !p.cfg.SingleUse && kasOffersReuse(stream)
			tc.batches = tc.reuse && p.a.offersBatches() && kasTakesBatches(stream)
		}
		next := p.a.serveCall(streamCtx, tc, msg.GetRequestInfo())
		p.mu.Lock()
		c.busy = false
		p.moveLocked(c, connConnecting)
		stopping := p.stopping
		p.mu.Unlock()
		if stopping {
			if next {
				_ = stream.CloseSend()
				drain(stream, cancel, p.cfg.DrainTimeout)
			}
			return endExit
		}
		if !next {
			if tc.reuse && endedForShutdown(stream) {
				return endShutdown
			}
			return endClean
		}
	}
}

// acceptedAfter: kas refuses a tunnel (token, limits, descriptor) as soon as it reads it, so a tunnel
// that stayed open this long, or took a call, was accepted: the agent is connected again.
const acceptedAfter = time.Second

// endedForShutdown reports whether kas ended a reusable tunnel that could not take another call because
// kas is shutting down: kas may end a tunnel before the call_end of its last call went out (see
// tunnelwriter.CallEndDelay). Such a tunnel has ended or was cancelled, so Recv returns at once (and makes
// the trailer safe to read).
func endedForShutdown(stream rpc.ReverseTunnel_ConnectClient) bool {
	if _, err := stream.Recv(); err == nil {
		return false
	}
	return endReason(stream) == rpc.EndReasonShutdown
}

// kasOffersReuse reports whether kas accepted the tunnel as reusable (rpc.TunnelReuseHeaderKey).
func kasOffersReuse(stream rpc.ReverseTunnel_ConnectClient) bool {
	md, err := stream.Header()
	return err == nil && len(md.Get(rpc.TunnelReuseHeaderKey)) > 0
}

// kasTakesBatches reports whether kas accepted the agent's offer of batches (rpc.TunnelBatchesHeaderKey).
func kasTakesBatches(stream rpc.ReverseTunnel_ConnectClient) bool {
	md, err := stream.Header()
	return err == nil && len(md.Get(rpc.TunnelBatchesHeaderKey)) > 0
}

// notServed is how an idle tunnel ends that did not get a call: withdrawn by the pool, ended by kas, or
// broken.
func (p *pool) notServed(c *conn, stream rpc.ReverseTunnel_ConnectClient, cancel context.CancelFunc, msg *rpc.ConnectResponse, err error, withdrawn, exit bool) tunnelEnd {
	if withdrawn {
		// Withdrawn: whatever kas sent (a call it had just picked this tunnel for included) is not ours
		// any more; kas gives that call to another tunnel.
		if err == nil {
			drain(stream, cancel, p.cfg.DrainTimeout)
		}
		if exit {
			return endExit
		}
		return endClean
	}
	if err == nil {
		// Anything but request_info first breaks the protocol.
		checker := rpc.NewChecker(rpc.KasToAgent)
		err = checker.Next(rpc.KasState(msg))
		p.a.cfg.Log.Warn("kas broke the tunnel protocol", "err", err)
		return p.failed(c, err)
	}
	switch reason := endReason(stream); {
	case reason == rpc.EndReasonShutdown:
		return endShutdown
	case err == io.EOF, reason == rpc.EndReasonCallEnded:
		// call-ended: kas ended the tunnel over a call, whatever status it carries; that says nothing
		// about this connection, so no backoff.
		return endClean
	}
	return p.failed(c, err)
}

// endReason is kas's reason for ending the tunnel (rpc.TunnelEndReasonKey), if it gave one.
func endReason(stream rpc.ReverseTunnel_ConnectClient) string {
	if v := stream.Trailer().Get(rpc.TunnelEndReasonKey); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (p *pool) failed(c *conn, err error) tunnelEnd {
	code := status.Code(err)
	p.a.metrics.connectError(code)
	if code == codes.Canceled && p.hardCtx.Err() != nil {
		return endExit
	}
	p.a.cfg.Log.Debug("tunnel failed", "err", err)
	c.err = err
	return endError
}

func (p *pool) becomeIdle(c *conn, stream rpc.ReverseTunnel_ConnectClient) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.stream = stream
	c.withdrawn, c.exit, c.busy = false, false, false
	if c.fresh {
		c.fresh = false
		p.spawned--
	}
	p.moveLocked(c, connIdle)
	p.idle[c] = struct{}{}
	if p.stopping {
		p.withdrawLocked(c)
		return
	}
	c.timer = p.cfg.afterFunc(p.cfg.MaxIdleTime, func() { p.idleTooLong(c, stream) })
}

// leaveIdle is called when Recv returned on an idle tunnel. It reports whether the tunnel serves a call:
// not when it was withdrawn in the meantime.
func (p *pool) leaveIdle(c *conn, gotCall bool) (serve, withdrawn, exit bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.withdrawn {
		return false, true, c.exit
	}
	delete(p.idle, c)
	if gotCall {
		c.busy = true
		p.moveLocked(c, connBusy)
		p.scaleUpLocked()
		return true, false, false
	}
	p.moveLocked(c, connConnecting)
	return false, false, false
}

// idleTooLong closes a tunnel that stayed idle for MaxIdleTime, unless that would leave fewer than
// MinIdle idle tunnels.
func (p *pool) idleTooLong(c *conn, stream rpc.ReverseTunnel_ConnectClient) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.stream != stream || c.state != connIdle || c.withdrawn {
		return // that tunnel is not idle any more
	}
	if p.counts[connIdle] <= p.cfg.MinIdle {
		c.timer.Reset(p.cfg.MaxIdleTime)
		return
	}
	p.withdrawLocked(c)
}

// withdrawLocked half-closes an idle tunnel: the agent takes no call on it any more, and its goroutine
// ends once kas ended the stream. If kas had just picked the tunnel for a call, kas gives that call to
// another tunnel.
func (p *pool) withdrawLocked(c *conn) {
	c.withdrawn = true
	c.exit = true
	delete(p.idle, c)
	p.moveLocked(c, connClosing)
	// CloseSend never runs concurrently with a Send: an idle tunnel's goroutine only receives.
	_ = c.stream.CloseSend()
}

// drain reads until kas ends the stream, at most d.
func drain(stream rpc.ReverseTunnel_ConnectClient, cancel context.CancelFunc, d time.Duration) {
	timer := time.AfterFunc(d, cancel)
	defer timer.Stop()
	for {
		if _, err := stream.Recv(); err != nil {
			return
		}
	}
}

// stop withdraws every idle tunnel and lets busy ones finish; when ctx ends first, calls in flight are
// cancelled. It returns after every pool goroutine ended.
func (p *pool) stop(ctx context.Context) {
	p.mu.Lock()
	p.stopping = true
	close(p.stopCh)
	for c := range p.idle {
		if c.timer != nil {
			c.timer.Stop()
		}
		p.withdrawLocked(c)
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		p.hardCancel()
		<-done
	}
	p.hardCancel()
}
