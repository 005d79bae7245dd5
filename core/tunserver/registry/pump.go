package registry

import (
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// Frame is one item of a caller's request: a message, or the half-close.
type Frame struct {
	Data []byte
	End  bool
}

// Target is where a call's request goes: a tunnel of this kas, or the private API stream to a
// gateway kas.
type Target interface {
	// Begin is called once, when the pump attaches, before any Frame.
	Begin() error
	Send(f Frame) error
}

// closeSendMsg is built once: protobuf messages are safe to marshal from several goroutines at once.
var closeSendMsg = &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CloseSend{CloseSend: &rpc.CloseSend{}}}

// tunnelTarget sends the request into a tunnel: request_info first, then messages and close_send.
type tunnelTarget struct {
	t    *Tunnel
	info *rpc.ConnectResponse
}

func (tt *tunnelTarget) Begin() error { return tt.t.send(tt.info) }

func (tt *tunnelTarget) Send(f Frame) error {
	if f.End {
		return tt.t.send(closeSendMsg)
	}
	return tt.t.send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: f.Data}}})
}

// RequestPump copies the caller's request frames to the current target. It starts reading once a
// target is attached; until the agent accepts the call (its first message), it keeps what it read, so
// that the call can move to another tunnel or gateway.
type RequestPump struct {
	src   grpc.ServerStream
	info  *rpc.ConnectResponse
	limit int

	accepted atomic.Bool

	mu         sync.Mutex // serializes sends to the target, in order
	target     Target
	log        []Frame
	logBytes   int
	replayable bool
	// attached is signalled on every attach, for a pump that waits with a full log.
	attached chan struct{}
}

// StartRequestPump starts reading the caller's frames from src. The pump ends when the caller
// half-closes or the call ends (the handler returns and RecvMsg fails).
func StartRequestPump(src grpc.ServerStream, info *rpc.RequestInfo, limit int) *RequestPump {
	p := &RequestPump{
		src:        src,
		info:       &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: info}},
		limit:      limit,
		replayable: true,
		attached:   make(chan struct{}, 1),
	}
	go p.run()
	return p
}

// attachTunnel attaches a tunnel of this kas.
func (p *RequestPump) attachTunnel(t *Tunnel) error {
	return p.Attach(&tunnelTarget{t: t, info: p.info})
}

// Attach sends everything read so far to target, in order; then the pump feeds target.
func (p *RequestPump) Attach(target Target) error {
	if tt, ok := target.(*tunnelTarget); ok && tt.info == nil {
		tt.info = p.info
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := target.Begin(); err != nil {
		return err
	}
	for _, f := range p.log {
		if err := target.Send(f); err != nil {
			return err
		}
	}
	p.target = target
	select {
	case p.attached <- struct{}{}:
	default:
	}
	return nil
}

// Detach stops feeding the current target. It reports whether the call can be replayed elsewhere.
func (p *RequestPump) Detach() (replayable bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = nil
	return p.replayable
}

// Accept drops the replay log: the agent has the call. It never blocks, so that the response direction
// never waits for the request direction.
func (p *RequestPump) Accept() {
	p.accepted.Store(true)
}

func (p *RequestPump) run() {
	ctx := p.src.Context()
	// Nothing is read before the call has somewhere to go: a call that waits for a tunnel holds no
	// more of its request than gRPC's flow-control window, whatever the caller sends.
	select {
	case <-p.attached:
	case <-ctx.Done():
		return
	}
	for {
		var raw grpctool.RawFrame
		err := p.src.RecvMsg(&raw)
		var f Frame
		switch {
		case err == io.EOF:
			f.End = true
		case err != nil:
			return // the call is over; the forwarder has the outcome
		default:
			f.Data = raw.Data
		}
		p.mu.Lock()
		// With no target yet the log is the only copy: wait for one rather than drop or grow without bound.
		for p.target == nil && p.replayable && !p.accepted.Load() && p.logBytes+len(f.Data) > p.limit && len(p.log) > 0 {
			p.mu.Unlock()
			select {
			case <-p.attached:
			case <-ctx.Done():
				return
			}
			p.mu.Lock()
		}
		p.record(f)
		if p.target != nil {
			// A failed send means the target is ending; the forwarder learns why from the other direction.
			_ = p.target.Send(f)
		}
		p.mu.Unlock()
		if f.End {
			return
		}
	}
}

func (p *RequestPump) record(f Frame) {
	if p.accepted.Load() {
		p.log = nil
		p.replayable = false
		return
	}
	if !p.replayable {
		return
	}
	p.logBytes += len(f.Data)
	if p.logBytes > p.limit && p.target != nil {
		p.log = nil
		p.replayable = false
		return
	}
	p.log = append(p.log, f)
}
