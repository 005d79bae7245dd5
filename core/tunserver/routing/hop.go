package routing

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// Hop stream defaults.
const (
	// DefaultMaxIdleHops bounds the idle hop streams kept per gateway kas: as many as calls went to it at
	// once, up to this.
	DefaultMaxIdleHops = 64
	// DefaultHopIdleTimeout: a hop stream not used for this long is closed (on both kas it holds
	// goroutines).
	DefaultHopIdleTimeout = time.Minute
	// hopEndTimeout bounds the wait for a call_end that follows an answer that is over already (after
	// no_tunnel): a gateway that does not send it loses the stream.
	hopEndTimeout = 5 * time.Second
)

// errHopNotStarted: the hop stream ended cleanly before the gateway took the call (it drains between
// calls): nothing of the call was read, and it may go elsewhere.
var errHopNotStarted = errors.New("the gateway ended the hop stream before it took the call")

// hopPool keeps hop streams (rpc.KasHopMethod) to gateway kas: an eager call to a gateway that serves
// them takes an idle one, or opens one, and gives it back once the gateway's call_end came. Anything
// else (the caller went away, the gateway broke the protocol or the stream) ends the stream.
type hopPool struct {
	dialer      GatewayDialer
	maxIdle     int
	idleTimeout time.Duration
	counts      hopCounts

	mu     sync.Mutex
	idle   map[string][]*hopStream
	all    map[*hopStream]struct{}
	closed bool
	wg     sync.WaitGroup // readers
}

// hopCounts counts hop streams (Finder.HopStreams).
type hopCounts struct {
	opened, reused atomic.Int64
}

func newHopPool(dialer GatewayDialer, maxIdle int, idleTimeout time.Duration) *hopPool {
	return &hopPool{dialer: dialer, maxIdle: maxIdle, idleTimeout: idleTimeout,
		idle: map[string][]*hopStream{}, all: map[*hopStream]struct{}{}}
}

// get returns an idle hop stream to url, or opens one; ctx bounds the opening only.
func (p *hopPool) get(ctx context.Context, url string) (*hopStream, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("hop streams closed")
	}
	for l := p.idle[url]; len(l) > 0; l = p.idle[url] {
		h := l[len(l)-1]
		p.idle[url] = l[:len(l)-1]
		if h.takeIdle() {
			p.mu.Unlock()
			p.counts.reused.Add(1)
			return h, nil
		}
	}
	p.mu.Unlock()
	return p.open(ctx, url)
}

func (p *hopPool) open(ctx context.Context, url string) (*hopStream, error) {
	conn, err := p.dialer.Conn(url)
	if err != nil {
		return nil, err
	}
	// The stream outlives the call that opens it; the call bounds only the opening.
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	cs, err := conn.NewStream(sctx, grpctool.BidiStreamDesc, rpc.KasHopMethod, grpctool.RawCallCodec())
	if !stop() || err != nil {
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
	h := &hopStream{pool: p, url: url, cs: cs, ctx: sctx, cancel: cancel, in: make(chan mem.BufferSlice), dead: make(chan struct{})}
	h.busy.Store(true)
	h.idleTimer = time.AfterFunc(time.Hour, h.expire)
	h.idleTimer.Stop()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cancel()
		return nil, errors.New("hop streams closed")
	}
	p.all[h] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	p.counts.opened.Add(1)
	go h.read()
	return h, nil
}

// put keeps h for the next call to its gateway, or ends it when enough are kept.
func (p *hopPool) put(h *hopStream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle[h.url]) >= p.maxIdle || h.isDead() {
		h.cancel()
		return
	}
	h.idleTimer.Reset(p.idleTimeout)
	p.idle[h.url] = append(p.idle[h.url], h)
}

// remove forgets h, which ended.
func (p *hopPool) remove(h *hopStream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.all, h)
	l := p.idle[h.url]
	for i, x := range l {
		if x == h {
			p.idle[h.url] = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(p.idle[h.url]) == 0 {
		delete(p.idle, h.url)
	}
}

// close ends every hop stream and waits for their readers.
func (p *hopPool) close() {
	p.mu.Lock()
	p.closed = true
	for h := range p.all {
		h.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// hopStream is one hop stream of the routing kas's: busy with one call, or idle in the pool.
type hopStream struct {
	pool   *hopPool
	url    string
	cs     grpc.ClientStream
	ctx    context.Context
	cancel context.CancelFunc
	// in hands the gateway's messages to the call under way, one at a time.
	in chan mem.BufferSlice
	// dead is closed, err set, when the stream ended.
	dead chan struct{}
	err  error
	// busy: a call has the stream. A message while idle breaks the protocol.
	busy      atomic.Bool
	idleTimer *time.Timer
}

// read reads the stream for its calls until it ends; an idle stream that ends leaves the pool.
func (h *hopStream) read() {
	defer h.pool.wg.Done()
	defer h.pool.remove(h)
	defer close(h.dead)
	defer h.cancel()
	for {
		var f heldFrame
		if err := h.cs.RecvMsg(&f); err != nil {
			h.err = err
			return
		}
		if !h.busy.Load() {
			f.bs.Free()
			h.err = status.Error(codes.Unavailable, "gateway kas broke the hop stream's protocol: a message between calls")
			return
		}
		if isCallEnd(f.bs) {
			// Idle from here on, before the call hears of it: the next call may take the stream at once.
			h.busy.Store(false)
		}
		select {
		case h.in <- f.bs:
		case <-h.ctx.Done():
			f.bs.Free()
		}
	}
}

func (h *hopStream) isDead() bool {
	select {
	case <-h.dead:
		return true
	default:
		return false
	}
}

// takeIdle claims an idle stream for a call; false when it ended meanwhile.
func (h *hopStream) takeIdle() bool {
	if !h.idleTimer.Stop() || h.isDead() {
		h.cancel()
		return false
	}
	h.busy.Store(true)
	return true
}

// expire ends a stream that stayed idle for the idle timeout.
func (h *hopStream) expire() {
	p := h.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if !h.busy.Load() {
		h.cancel()
	}
}

// start begins a call on h: the hop stream's equivalent of opening a gateway stream with md for
// fullMethod, with ctx's deadline.
func (h *hopStream) start(ctx context.Context, fullMethod string, md metadata.MD) (*hopCall, error) {
	st := &rpc.HopStart{Method: fullMethod, Meta: rpc.MetaToValues(md)}
	if dl, ok := ctx.Deadline(); ok {
		st.Deadline = timestamppb.New(dl)
	}
	c := &hopCall{h: h, ctx: ctx}
	if err := h.cs.SendMsg(&rpc.HopRequest{Msg: &rpc.HopRequest_Start{Start: st}}); err != nil {
		c.broken = true
		return c, err
	}
	return c, nil
}

// isCallEnd reports whether bs, a gateway message on a hop stream, is call_end, from its first bytes.
func isCallEnd(bs mem.BufferSlice) bool {
	for _, b := range bs {
		if d := b.ReadOnlyData(); len(d) > 0 {
			return rpc.IsHopCallEnd(d)
		}
	}
	return false
}

// heldFrame keeps a received message's buffers as they are, for the call to decode.
type heldFrame struct{ bs mem.BufferSlice }

func (f *heldFrame) UnmarshalBuffers(data mem.BufferSlice) error {
	data.Ref()
	f.bs = data
	return nil
}

// hopCall is one call on a hop stream, as a gateway stream of its own (a grpc.ClientStream for the
// eager gateway's code): its request goes out as hop messages, its answer comes in until call_end.
type hopCall struct {
	h   *hopStream
	ctx context.Context
	// answered: a message of the gateway's for this call came (the call is under way there).
	answered bool
	// ended: call_end came, with endErr (nil for OK) and trailer.
	ended   bool
	endErr  error
	trailer metadata.MD
	// broken: the stream cannot carry another call.
	broken bool
}

func (c *hopCall) Context() context.Context     { return c.ctx }
func (c *hopCall) Header() (metadata.MD, error) { return c.h.cs.Header() }

func (c *hopCall) Trailer() metadata.MD {
	if c.ended {
		return c.trailer
	}
	return c.h.cs.Trailer()
}

func (c *hopCall) CloseSend() error {
	return c.h.cs.SendMsg(&rpc.HopRequest{Msg: &rpc.HopRequest_CloseSend{CloseSend: &rpc.CloseSend{}}})
}

func (c *hopCall) SendMsg(m any) error {
	f, ok := m.(*grpctool.RawFrame)
	if !ok {
		return status.Errorf(codes.Internal, "hop stream: cannot send a %T", m)
	}
	return c.h.cs.SendMsg(&rpc.HopMessage{Data: f.Data, Shared: f.Shared})
}

// RecvMsg receives the gateway's next message for the call; at call_end, io.EOF or the call's status.
func (c *hopCall) RecvMsg(m any) error {
	return c.recv(m, nil)
}

func (c *hopCall) recv(m any, timeout <-chan time.Time) error {
	if c.ended {
		return c.endResult()
	}
	select {
	case bs := <-c.h.in:
		c.answered = true
		if isCallEnd(bs) {
			head := bs.Materialize()
			bs.Free()
			end, err := rpc.ParseHopCallEnd(head)
			if err != nil {
				c.broken = true
				return status.Errorf(codes.Unavailable, "gateway kas broke the protocol: %v", err)
			}
			c.ended = true
			c.endErr = status.ErrorProto(end.GetStatus())
			c.trailer = rpc.ValuesToMeta(end.GetTrailer())
			return c.endResult()
		}
		err := grpctool.RawCodec{}.Unmarshal(bs, m)
		bs.Free()
		return err
	case <-c.h.dead:
		c.broken = true
		if c.h.err == io.EOF && !c.answered {
			return errHopNotStarted
		}
		if c.h.err == io.EOF {
			return status.Error(codes.Unavailable, "gateway kas ended the hop stream in the middle of a call")
		}
		return c.h.err
	case <-c.ctx.Done():
		c.broken = true
		return status.FromContextError(c.ctx.Err()).Err()
	case <-timeout:
		c.broken = true
		return status.Error(codes.Unavailable, "gateway kas did not end the call on its hop stream in time")
	}
}

// endResult is what RecvMsg says once call_end came: io.EOF, or the call's status.
func (c *hopCall) endResult() error {
	if c.endErr != nil {
		return c.endErr
	}
	return io.EOF
}

// awaitEnd reads what is left of an answer that is over (after no_tunnel) up to call_end.
func (c *hopCall) awaitEnd() {
	t := time.NewTimer(hopEndTimeout)
	defer t.Stop()
	var f grpctool.RawFrame
	for !c.ended && !c.broken {
		if err := c.recv(&f, t.C); err != nil {
			break
		}
	}
}

// release gives the stream back once the gateway ended the call, or ends it.
func (c *hopCall) release() {
	if c.ended && !c.broken {
		c.h.pool.put(c.h)
		return
	}
	c.h.cancel()
}
