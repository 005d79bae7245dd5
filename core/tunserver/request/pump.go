package request

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// DefaultReplayLimit bounds the request bytes kept to replay a call on another tunnel when the agent
// withdraws the first one before accepting the call. Calls with more request data in flight fail instead
// in that (rare) race.
const DefaultReplayLimit = 4 << 20

// Frame is one item of a caller's request: a message, or the half-close.
type Frame struct {
	Data []byte
	// Buf, when set, is a pooled buffer that Data is all of (a request of grpctool.MediumMin bytes or more, see
	// grpctool.RawFrame.KeepShared), counted by references: the pump holds one while it sends
	// the frame and one while its replay log keeps it, and the buffer goes back to its pool once the
	// last is freed. A target that hands Data to a write without copying it passes Buf on with it
	// (grpctool.RawFrame.Shared), so that the write holds a reference of its own; no target keeps Data
	// past Send otherwise.
	Buf mem.Buffer
	End bool
}

// free frees the frame's reference to its pooled buffer, if it has one.
func (f Frame) free() {
	if f.Buf != nil {
		f.Buf.Free()
	}
}

// Target is where a call's request goes: a tunnel of this kas, or the private API stream to a
// gateway kas.
type Target interface {
	// Begin is called once, when the pump attaches, before any Frame.
	Begin() error
	Send(f Frame) error
}

// Pump copies the caller's request frames to the current target. It starts reading once a target is
// attached; until the agent accepts the call (its first message), it keeps what it read, so
// that the call can move to another tunnel or gateway.
type Pump struct {
	src   grpc.ServerStream
	info  *rpc.ConnectResponse
	limit int

	accepted atomic.Bool

	mu     sync.Mutex // serializes sends to the target, in order
	target Target
	// provisional: the target may still refuse the call (an eager gateway), so it gets only what the
	// replay log holds; Confirm lifts that.
	provisional bool
	// ended: the call is over (DetachForGood); nothing attaches any more.
	ended bool
	// attached is signalled on every attach, for a pump that waits with a full log.
	attached chan struct{}
	// reading: the caller's frames have a reader (started at the first attach, see AttachWhole).
	reading bool

	// logMu guards the replay log. It is never held while sending, so that Accept can drop the log at
	// once without waiting for a send; whoever changes the log but Accept holds mu as well.
	logMu      sync.Mutex
	log        []Frame
	logBytes   int
	replayable bool
}

// Start makes the pump of a call whose frames come from src. It reads nothing until its first attach
// (see Attach and AttachWhole); it ends when the caller half-closes or the call ends (the handler
// returns and RecvMsg fails).
func Start(src grpc.ServerStream, info *rpc.RequestInfo, limit int) *Pump {
	return &Pump{
		src:        src,
		info:       &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: info}},
		limit:      limit,
		replayable: true,
		attached:   make(chan struct{}, 1),
	}
}

// RequestInfo is the call's request_info as a tunnel sends it first, built once for every tunnel the
// call tries.
func (p *Pump) RequestInfo() *rpc.ConnectResponse { return p.info }

// Attach sends everything read so far to target, in order; then the pump feeds target.
func (p *Pump) Attach(target Target) error {
	_, err := p.attach(target, false, false)
	return err
}

// attach makes target the pump's, after everything read so far. The first attach gives the caller's
// frames a reader: a goroutine of its own, or, with inline, the caller of attach (claimed reports that it
// must read).
func (p *Pump) attach(target Target, provisional, inline bool) (claimed bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return false, ErrCallOver
	}
	if err := target.Begin(); err != nil {
		return false, err
	}
	log := p.replayLog()
	err = replay(target, log)
	for _, f := range log {
		f.free()
	}
	if err != nil {
		return false, err
	}
	p.target, p.provisional = target, provisional
	select {
	case p.attached <- struct{}{}:
	default:
	}
	if p.reading {
		return false, nil
	}
	// Nothing is read before the call has somewhere to go: a call that waits for a tunnel holds no more
	// of its request than gRPC's flow-control window, whatever the caller sends.
	p.reading = true
	if inline {
		return true, nil
	}
	go p.run()
	return false, nil
}

// AttachWhole is Attach for a call whose caller sends messages request messages and half-closes without
// waiting for anything: a unary or server-streaming method (one message), or a caller inside kas that
// said so (WithWholeRequest). At the first attach it reads them and the half-close itself, on the
// calling goroutine, so that no goroutine hand-off sits between the caller's request and the tunnel.
// Anything more (a caller that does not keep to what was said) goes through a reader of its own, as with
// Attach.
func (p *Pump) AttachWhole(target Target, messages int) error {
	claimed, err := p.attach(target, false, true)
	if err != nil || !claimed {
		return err
	}
	ctx := p.src.Context()
	for range messages + 1 {
		if p.step(ctx) {
			return nil
		}
	}
	go p.run()
	return nil
}

// AttachProvisional attaches a target that may still refuse the call having read nothing: it gets
// frames only while they fit in the replay log, so that Detach always finds the call replayable. Confirm
// once the target took the call.
func (p *Pump) AttachProvisional(target Target) error {
	_, err := p.attach(target, true, false)
	return err
}

// Confirm makes a provisional target a plain one: the rest of the request follows.
func (p *Pump) Confirm() {
	p.mu.Lock()
	p.provisional = false
	p.mu.Unlock()
	select {
	case p.attached <- struct{}{}:
	default:
	}
}

// replayLog is what a new target must get first. Only record appends to the log, under mu as well: the
// frames returned stay as they are while the caller holds mu. Each pooled frame comes with a reference
// of the caller's, to free once sent: Accept may drop the log (and its references) meanwhile.
func (p *Pump) replayLog() []Frame {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	for _, f := range p.log {
		if f.Buf != nil {
			f.Buf.Ref()
		}
	}
	return p.log
}

func replay(target Target, log []Frame) error {
	for _, f := range log {
		if err := target.Send(f); err != nil {
			return err
		}
	}
	return nil
}

// Detach stops feeding the current target. It reports whether the call can be replayed elsewhere: not
// once the agent accepted it, nor once its request outgrew the replay limit.
func (p *Pump) Detach() (replayable bool) {
	p.mu.Lock()
	p.target, p.provisional = nil, false
	p.mu.Unlock()
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p.replayable
}

// ErrCallOver: the call ended before the pump was attached.
var ErrCallOver = errors.New("the call ended before it reached a tunnel")

// DetachForGood detaches for the last time: the call is over, and a later attach fails with
// ErrCallOver. It reports whether a target was attached: whether anything of the call (its request_info
// first) went out. A send under way finishes first.
func (p *Pump) DetachForGood() (wasAttached bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.target != nil
	p.target, p.provisional, p.ended = nil, false, true
	return was
}

// Accepted reports whether the agent accepted the call (see Accept).
func (p *Pump) Accepted() bool { return p.accepted.Load() }

// Accept drops the replay log: the agent has the call. It never waits for a send to the target, so that
// the response direction never waits for the request direction.
func (p *Pump) Accept() {
	p.accepted.Store(true) // before the drop: every record from now on sees it and keeps nothing
	p.logMu.Lock()
	defer p.logMu.Unlock()
	p.dropLogLocked()
}

func (p *Pump) dropLogLocked() {
	for _, f := range p.log {
		f.free()
	}
	p.log, p.logBytes, p.replayable = nil, 0, false
}

// run reads the caller's frames until the call's request or the call ends. It starts at the first
// attach: the call has somewhere to go.
func (p *Pump) run() {
	ctx := p.src.Context()
	for !p.step(ctx) {
	}
}

// step reads one frame of the caller's and passes it on. It reports whether reading is over: the caller
// half-closed, or the call ended.
func (p *Pump) step(ctx context.Context) (over bool) {
	raw := grpctool.RawFrame{KeepShared: true}
	err := p.src.RecvMsg(&raw)
	var f Frame
	switch {
	case err == io.EOF:
		f.End = true
	case err != nil:
		return true // the call is over; the forwarder has the outcome
	default:
		f.Data, f.Buf = raw.Data, raw.Shared
	}
	defer f.free() // the log and the target's write take references of their own
	p.mu.Lock()
	// With no target yet the log is the only copy: wait for one rather than drop or grow without bound.
	// A provisional target may still refuse the call: it gets no more than the log can replay.
	for (p.target == nil || p.provisional) && p.logFull(f) {
		p.mu.Unlock()
		select {
		case <-p.attached:
		case <-ctx.Done():
			return true
		}
		p.mu.Lock()
	}
	p.record(f)
	if p.target != nil {
		// A failed send means the target is ending; the forwarder learns why from the other direction.
		_ = p.target.Send(f)
	}
	p.mu.Unlock()
	return f.End
}

// logFull reports whether f would take the replay log past the limit. The first frame is always kept,
// however large, and so is the half-close: it is the last frame and costs the log no bytes, and a
// gateway that reads a one-message request whole waits for it before it says tunnel_ready
// (rpc.GatewayEagerV2).
func (p *Pump) logFull(f Frame) bool {
	if f.End {
		return false
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return !p.accepted.Load() && p.replayable && len(p.log) > 0 && p.logBytes+len(f.Data) > p.limit
}

// record keeps f to replay while the call may still move. It is called with mu held.
func (p *Pump) record(f Frame) {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	if p.accepted.Load() || !p.replayable {
		p.dropLogLocked()
		return
	}
	p.logBytes += len(f.Data)
	if p.logBytes > p.limit && p.target != nil && !p.provisional {
		p.dropLogLocked()
		return
	}
	if f.Buf != nil {
		f.Buf.Ref()
	}
	p.log = append(p.log, f)
}
