package registry

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
)

// DefaultReplayLimit bounds the request bytes kept to replay a call on another tunnel when the agent
// withdraws the first one before accepting the call. Calls with more request data in flight fail instead
// in that (rare) race.
const DefaultReplayLimit = 4 << 20

// Sink takes the agent's answer to a call, one message at a time, for the caller.
type Sink func(*rpc.ConnectRequest) error

// ErrRetryOtherTunnel: the tunnel could not take the call, and nothing the agent did with it can have had
// an effect; the call may go to another tunnel.
var ErrRetryOtherTunnel = errors.New("tunnel withdrawn before it accepted the call")

// idleResultErr is the Connect status for what the agent sent on a tunnel that had no call.
func idleResultErr(res recvResult) error {
	switch {
	case res.err == io.EOF:
		return nil // the agent withdrew the idle tunnel: a clean end
	case res.err != nil:
		return res.err
	default:
		c := rpc.NewChecker(rpc.AgentToKas)
		_ = c.Next(rpc.StateDescriptor)
		return c.Next(rpc.AgentState(res.msg))
	}
}

func earlyErr(t *Tunnel) error {
	if t.early == nil {
		return nil
	}
	return idleResultErr(*t.early)
}

// readLoop is the tunnel's only reader. While the tunnel is idle or found it watches for the agent
// withdrawing or breaking the tunnel; while forwarding it passes every agent message on to the caller
// itself, so that no goroutine hand-off sits between the tunnel and the caller.
func (t *Tunnel) readLoop(r *Registry) {
	var fwd *forwarding
	for {
		msg, err := t.stream.Recv()
		res := recvResult{msg: msg, err: err}
		if fwd == nil {
			if fwd = r.onReaderResult(t, res); fwd == nil {
				return
			}
		}
		if v, over := fwd.handle(res); over {
			fwd.result <- v // buffered: never blocks
			return
		}
	}
}

// verdict is how a call ended from the tunnel's side.
type verdict struct {
	kind verdictKind
	err  error
}

type verdictKind int

const (
	verdictDone       verdictKind = iota // the agent's answer went to the caller
	verdictWithdrawn                     // the agent withdrew the tunnel before it accepted the call
	verdictBroken                        // the stream failed; err is the stream's error
	verdictViolation                     // the agent broke the protocol; err is the InvalidArgument for it
	verdictCallerGone                    // the caller could not take the answer; err is the sink's error
)

// forwarding is one call on a tunnel, as the reader sees it.
type forwarding struct {
	pump    *RequestPump
	sink    Sink
	checker rpc.Checker
	result  chan verdict
}

func newForwarding(pump *RequestPump, sink Sink) *forwarding {
	f := &forwarding{pump: pump, sink: sink, checker: rpc.NewChecker(rpc.AgentToKas), result: make(chan verdict, 1)}
	_ = f.checker.Next(rpc.StateDescriptor)
	return f
}

// handle takes one result of Recv; over reports that the call is over from the agent's side.
func (f *forwarding) handle(res recvResult) (v verdict, over bool) {
	if res.err == io.EOF {
		if err := f.checker.Next(rpc.StateEOF); err != nil {
			return verdict{kind: verdictViolation, err: err}, true
		}
		if !f.pump.accepted.Load() {
			return verdict{kind: verdictWithdrawn}, true
		}
		return verdict{kind: verdictDone}, true
	}
	if res.err != nil {
		return verdict{kind: verdictBroken, err: res.err}, true
	}
	st := rpc.AgentState(res.msg)
	if err := f.checker.Next(st); err != nil {
		return verdict{kind: verdictViolation, err: err}, true
	}
	f.pump.Accept()
	if err := f.sink(res.msg); err != nil {
		return verdict{kind: verdictCallerGone, err: err}, true
	}
	if st == rpc.StateError {
		return verdict{kind: verdictDone}, true
	}
	return verdict{}, false
}

// startForwarding moves a found tunnel to forwarding with fwd. It fails with ErrRetryOtherTunnel when
// the agent withdrew or broke the tunnel while it was found: nothing was sent, so another tunnel may take
// the call.
func (t *Tunnel) startForwarding(r *Registry, fwd *forwarding) error {
	t.mu.Lock()
	if t.state == TunnelFound && t.early == nil {
		t.fwd = fwd
		err := t.moveLocked(TunnelForwarding)
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	r.finish(t, earlyErr(t), "")
	return ErrRetryOtherTunnel
}

// Forward carries one call over the tunnel: the request through pump, every agent message to sink. It
// returns ErrRetryOtherTunnel when the call should go to another tunnel, the caller's context error when
// the caller went away, a status for the caller when the tunnel broke, or nil when the agent's answer
// (including a final error status) went to sink.
func (t *Tunnel) Forward(ctx context.Context, pump *RequestPump, sink Sink) error {
	r := t.reg
	if t.maxSend > 0 {
		// gRPC ends a stream whose message it refuses to send: a request info that cannot fit must fail
		// its call while the tunnel is still found, so that the tunnel goes back to idle untouched.
		if n := proto.Size(pump.info); n > t.maxSend {
			r.onLimit.Hit(tunserver.LimitMetadataSize)
			return status.Errorf(codes.ResourceExhausted, "the call's request info is %d bytes, larger than a tunnel message may be (%d bytes): send less metadata", n, t.maxSend)
		}
	}
	fwd := newForwarding(pump, sink)
	if err := t.startForwarding(r, fwd); err != nil {
		return err
	}
	// The caller's end ends the tunnel at once, whatever forward is waiting for: a send to an agent that
	// stopped reading holds the pump (and attach) until the tunnel's stream ends, which only the tunnel's
	// end brings about. For the same reason the tunnel always ends before the pump is detached below.
	stop := context.AfterFunc(ctx, func() { r.finish(t, errCallerCancelled, rpc.EndReasonCallEnded) })
	defer stop()
	if err := pump.attachTunnel(t); err != nil {
		// The stream ended under us: nothing reached the agent's service. The reader stops on its own.
		r.finish(t, nil, rpc.EndReasonCallEnded)
		pump.Detach()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrRetryOtherTunnel
	}
	var v verdict
	select {
	case v = <-fwd.result:
	case <-ctx.Done():
		r.finish(t, errCallerCancelled, rpc.EndReasonCallEnded)
		pump.Detach()
		<-fwd.result // the reader may be using sink; the tunnel's end makes it stop
		return ctx.Err()
	}
	switch v.kind {
	case verdictDone, verdictWithdrawn:
		r.finish(t, nil, "")
	case verdictBroken, verdictViolation:
		r.finish(t, v.err, "")
	default: // verdictCallerGone
		r.finish(t, callerGoneErr(ctx, v.err), rpc.EndReasonCallEnded)
	}
	replayable := pump.Detach()
	switch v.kind {
	case verdictDone:
		return nil
	case verdictWithdrawn:
		if replayable {
			return ErrRetryOtherTunnel
		}
		return status.Errorf(codes.Unavailable, "agent %d withdrew the tunnel as the call arrived and the request was too large to replay", t.agentID)
	case verdictBroken:
		if status.Code(v.err) == codes.ResourceExhausted {
			// The agent sent a message over the tunnel's own size bound: an answer too large, not a
			// network failure that a retry could mend.
			r.onLimit.Hit(tunserver.LimitMessageSize)
			return status.Errorf(codes.ResourceExhausted, "agent %d sent a response message larger than the limit (--max-message-size): %v", t.agentID, status.Convert(v.err).Message())
		}
		return status.Errorf(codes.Unavailable, "tunnel to agent %d broke: %v", t.agentID, status.Convert(v.err).Message())
	case verdictViolation:
		return status.Errorf(codes.Unavailable, "agent %d broke the tunnel protocol: %v", t.agentID, status.Convert(v.err).Message())
	default: // verdictCallerGone
		return v.err
	}
}

var errCallerCancelled = status.Error(codes.Canceled, "the caller cancelled the call")

// callerGoneErr is what the agent learns when its answer could not reach the caller: that the caller
// went away, or, when the caller is still there, why kas refused the answer (a message over the limit,
// a header that is not valid gRPC metadata).
func callerGoneErr(ctx context.Context, sinkErr error) error {
	if ctx.Err() != nil {
		return status.Error(codes.Canceled, "the caller went away")
	}
	st := status.Convert(sinkErr)
	if st.Code() == codes.ResourceExhausted {
		return sinkErr
	}
	return status.Errorf(st.Code(), "kas refused the answer: %s", st.Message())
}
