package registry

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
)

// Sink takes the agent's answer to a call, one message at a time, for the caller. pooled, when set, is
// the buffer of grpctool.PayloadPool that m's payload is, and the sink owns it (see grpctool.RawFrame's
// Pooled): nothing else reads that payload after the sink returned.
//
// more reports that the agent sent more of the call's answer with m, in the same batch, which the sink
// gets at once: it may hold m to send them together, and must send what it holds when a call has more
// false (the last message of a batch, or the one before the agent's call_end, which no sink gets).
type Sink func(m *rpc.ConnectRequest, pooled *[]byte, more bool) error

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
// itself, so that no goroutine hand-off sits between the tunnel and the caller. On a reusable tunnel it
// goes on after each call.
func (t *Tunnel) readLoop(r *Registry) {
	var fwd *forwarding
	for {
		msg, pooled, err := rpc.RecvRequestPooled(t.stream)
		res := recvResult{msg: msg, pooled: pooled, err: err, more: t.moreForSink()}
		if fwd == nil {
			if fwd = r.onReaderResult(t, res); fwd == nil {
				return
			}
		}
		v, over := fwd.handle(res)
		if v.kind != verdictNone {
			fwd.deliver(v)
		}
		if !over {
			continue
		}
		if v.kind == verdictBroken || v.kind == verdictViolation || v.kind == verdictWithdrawn || res.err != nil {
			if fwd.reuse {
				// Forward may have returned already (the caller went away): the reader ends the tunnel.
				r.finish(t, v.err, "")
			}
			return
		}
		// The agent's call_end on a reusable tunnel: the call is over from its side.
		r.agentEndedCall(t, fwd)
		fwd = nil
	}
}

// moreForSink reports whether the message just received has another of the call's answer right behind
// it in the same batch (a sink may then hold it; see Sink): anything but a call_end, which the reader
// handles itself.
func (t *Tunnel) moreForSink() bool {
	b, ok := t.stream.(interface{ Peek() *rpc.ConnectRequest })
	if !ok {
		return false
	}
	next := b.Peek()
	return next != nil && rpc.AgentState(next) != rpc.StateCallEnd
}

// verdict is how a call ended from the tunnel's side.
type verdict struct {
	kind verdictKind
	err  error
}

type verdictKind int

const (
	verdictNone       verdictKind = iota // nothing to tell Forward yet
	verdictDone                          // the agent's answer went to the caller
	verdictWithdrawn                     // the agent withdrew the tunnel before it accepted the call
	verdictBroken                        // the stream failed; err is the stream's error
	verdictViolation                     // the agent broke the protocol; err is the InvalidArgument for it
	verdictCallerGone                    // the caller could not take the answer; err is the sink's error
)

// forwarding is one call on a tunnel, as the reader and Forward see it.
type forwarding struct {
	pump    *request.Pump
	sink    Sink
	checker rpc.Checker
	reuse   bool
	result  chan verdict
	// delivered: result got its one verdict (only the reader delivers).
	delivered bool
	// answered: the agent's answer to the caller is complete (a reusable tunnel's call_end may follow).
	answered bool

	// sinkMu orders sink calls with kasEnded: once kas ended the call, the caller's stream is not
	// touched any more (its handler may have returned).
	sinkMu   sync.Mutex
	kasEnded bool
	// kasEndClaimed: endCall ran (it runs once).
	kasEndClaimed bool
	// ends counts the ends of a call on a reusable tunnel: kas's call_end sent and the agent's received.
	// Whoever makes it two returns the tunnel to idle.
	ends       atomic.Int32
	agentEnded atomic.Bool
	// drainTimer ends the tunnel when the agent's call_end does not come in time.
	drainTimer *time.Timer
}

func newForwarding(pump *request.Pump, sink Sink, reuse bool) *forwarding {
	table := rpc.AgentToKas
	if reuse {
		table = rpc.AgentToKasReuse
	}
	f := &forwarding{pump: pump, sink: sink, checker: rpc.NewChecker(table), reuse: reuse, result: make(chan verdict, 1)}
	_ = f.checker.Next(rpc.StateDescriptor)
	return f
}

func (f *forwarding) deliver(v verdict) {
	if !f.delivered {
		f.delivered = true
		f.result <- v // buffered: never blocks
	}
}

// handle takes one result of Recv. It returns what to tell Forward (verdictNone: nothing) and whether the
// call is over from the agent's side: the stream ended or broke, or, on a reusable tunnel, the agent's
// call_end arrived.
func (f *forwarding) handle(res recvResult) (v verdict, over bool) {
	if res.err == io.EOF {
		if err := f.checker.Next(rpc.StateEOF); err != nil {
			return verdict{kind: verdictViolation, err: err}, true
		}
		if !f.pump.Accepted() {
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
	if st == rpc.StateCallEnd {
		return f.agentCallEnd()
	}
	f.sinkMu.Lock()
	defer f.sinkMu.Unlock()
	if f.kasEnded {
		return verdict{}, false // the rest of a call kas ended: dropped until the agent's call_end
	}
	if err := f.sink(res.msg, res.pooled, res.more); err != nil {
		f.kasEnded = f.reuse // nothing more goes to a caller that could not take this
		return verdict{kind: verdictCallerGone, err: err}, !f.reuse
	}
	if st == rpc.StateError {
		f.answered = true
		return verdict{kind: verdictDone}, !f.reuse
	}
	if st == rpc.StateTrailer {
		f.answered = true // an error may follow: the answer is complete at error or call_end
	}
	return verdict{}, false
}

// agentCallEnd is the agent's call_end: the answer is complete, or kas had ended the call first; the
// agent ending a call kas did not end without an answer is a violation.
func (f *forwarding) agentCallEnd() (verdict, bool) {
	f.sinkMu.Lock()
	ended := f.kasEnded
	f.sinkMu.Unlock()
	if !ended && !f.answered {
		return verdict{kind: verdictViolation, err: status.Error(codes.InvalidArgument, "agent->kas reusable tunnel: call_end before the answer's trailer or error")}, true
	}
	f.agentEnded.Store(true)
	if ended {
		return verdict{}, true
	}
	return verdict{kind: verdictDone}, true
}

// stopSink makes sure sink is not called any more (the caller's handler may return): a sink call in
// progress ends first.
func (f *forwarding) stopSink() {
	f.sinkMu.Lock()
	f.kasEnded = true
	f.sinkMu.Unlock()
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
// (including a final error status) went to sink. A single-use tunnel ends with its call; a reusable one
// goes back to idle once both ends sent their call_end.
func (t *Tunnel) Forward(ctx context.Context, pump *request.Pump, sink Sink) error {
	r := t.reg
	infoSize := 0
	if t.maxSend > 0 {
		// gRPC ends a stream whose message it refuses to send: a request info that cannot fit must fail
		// its call while the tunnel is still found, so that the tunnel goes back to idle untouched.
		infoSize = grpctool.ProtoSize(pump.RequestInfo())
		if n := infoSize; n > t.maxSend {
			r.onLimit.Hit(tunserver.LimitMetadataSize)
			return status.Errorf(codes.ResourceExhausted, "the call's request info is %d bytes, larger than a tunnel message may be (%d bytes): send less metadata", n, t.maxSend)
		}
	}
	fwd := newForwarding(pump, sink, t.reuse)
	if err := t.startForwarding(r, fwd); err != nil {
		return err
	}
	// The caller's end ends the call at once, whatever Forward is waiting for: a send to an agent that
	// stopped reading holds the pump (and attach) until the stream ends, which only the end of the call
	// (or, when the agent does not confirm it, of the tunnel) brings about.
	stop := context.AfterFunc(ctx, func() { t.endCall(fwd, errCallerCancelled) })
	defer stop()
	target := t.target(pump.RequestInfo(), infoSize, request.WholeRequest(ctx))
	attach := pump.Attach
	if n := target.messages; n > 0 {
		attach = func(tt request.Target) error { return pump.AttachWhole(tt, n) }
	}
	if err := attach(target); err != nil {
		if errors.Is(err, request.ErrCallOver) {
			// The caller went away before the call reached the tunnel: endCall gave the tunnel back.
			return ctx.Err()
		}
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
		if !t.reuse {
			t.endCall(fwd, errCallerCancelled)
			<-fwd.result // the reader may be using sink; the tunnel's end makes it stop
			return ctx.Err()
		}
		// The caller's stream is not touched from here on. Ending the call may wait for a request frame
		// held by flow control (until the drain timeout ends the tunnel): it runs aside, so that the
		// caller's handler returns at once. endCall runs once, whoever gets there first.
		fwd.stopSink()
		go t.endCall(fwd, errCallerCancelled)
		return ctx.Err()
	}
	return t.afterVerdict(ctx, fwd, v)
}

// afterVerdict ends the call as the verdict says and returns the caller's status.
func (t *Tunnel) afterVerdict(ctx context.Context, fwd *forwarding, v verdict) error {
	r := t.reg
	switch v.kind {
	case verdictDone:
		t.endCall(fwd, nil)
		return nil
	case verdictCallerGone:
		t.endCall(fwd, callerGoneErr(ctx, v.err))
		return v.err
	case verdictWithdrawn:
		r.finish(t, nil, "")
		if fwd.pump.Detach() {
			return ErrRetryOtherTunnel
		}
		return status.Errorf(codes.Unavailable, "agent %d withdrew the tunnel as the call arrived and the request was too large to replay", t.agentID)
	case verdictBroken:
		r.finish(t, v.err, "")
		fwd.pump.Detach()
		if status.Code(v.err) == codes.ResourceExhausted {
			// The agent sent a message over the tunnel's own size bound: an answer too large, not a
			// network failure that a retry could mend.
			r.onLimit.Hit(tunserver.LimitMessageSize)
			return status.Errorf(codes.ResourceExhausted, "agent %d sent a response message larger than the limit (--max-message-size): %v", t.agentID, status.Convert(v.err).Message())
		}
		return status.Errorf(codes.Unavailable, "tunnel to agent %d broke: %v", t.agentID, status.Convert(v.err).Message())
	default: // verdictViolation
		r.finish(t, v.err, "")
		fwd.pump.Detach()
		return status.Errorf(codes.Unavailable, "agent %d broke the tunnel protocol: %v", t.agentID, status.Convert(v.err).Message())
	}
}

// endCall ends the call from kas's side; why is nil when the call completed. A single-use tunnel ends
// (why, if any, becomes the agent's Connect status). A reusable one sends call_end (with why) after the
// last request frame and goes back to idle once the agent's call_end is in too; an agent that does not
// send it within the drain timeout loses the tunnel. It may run twice (the caller's end races the
// verdict): the second run does nothing.
func (t *Tunnel) endCall(fwd *forwarding, why error) {
	r := t.reg
	fwd.sinkMu.Lock()
	first := !fwd.kasEndClaimed
	fwd.kasEnded, fwd.kasEndClaimed = true, true
	fwd.sinkMu.Unlock()
	if !first {
		return
	}
	if !t.reuse {
		reason := ""
		if why != nil {
			reason = rpc.EndReasonCallEnded
		}
		r.finish(t, why, reason)
		fwd.pump.Detach()
		return
	}
	if !fwd.pump.DetachForGood() {
		// The caller went away before request_info went out (the end raced Forward's attach): the
		// agent knows of no call, so neither side ends one, and the tunnel is idle again at once. A
		// call_end now would reach an agent with no call and break the protocol.
		r.afterCall(t, fwd)
		return
	}
	if !fwd.agentEnded.Load() {
		fwd.drainTimer = time.AfterFunc(t.drain, func() {
			r.finish(t, status.Errorf(codes.DeadlineExceeded, "the agent did not end its call within %s of kas ending it", t.drain), "")
		})
	}
	// DetachForGood above waited for a request frame being sent: call_end comes after every frame.
	if why == nil {
		// The call completed: the agent learns nothing from kas's end but that the tunnel is free, which
		// can share a write with the tunnel's next call.
		t.out.HoldCallEnd()
	} else if err := t.out.Send(callEndMsg(why)); err != nil {
		r.finish(t, nil, "")
		return
	}
	if fwd.ends.Add(1) == 2 {
		r.afterCall(t, fwd)
	}
}

// closeSendMsg is built once: protobuf messages are safe to marshal from several goroutines at once.
var closeSendMsg = &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CloseSend{CloseSend: &rpc.CloseSend{}}}

// batchOverhead bounds what a batch adds to its messages: tags and lengths, a held call_end and a
// close_send.
const batchOverhead = 64

// tunnelTarget sends the request into a tunnel: request_info first, then messages and close_send.
type tunnelTarget struct {
	t    *Tunnel
	info *rpc.ConnectResponse
	// messages is how many request messages the caller sends at once, then half-closes: 1 when the agent
	// said the caller sends one request (rpc.Method.one_request), what an in-process caller said
	// (request.WithWholeRequest), 0 when nothing is known.
	messages int
	// hold: the tunnel is batched and the caller sends its request at once, so request_info and up to
	// messages messages (BatchMaxBytes in all) wait for close_send to leave with it as one batch (see
	// tunnelwriter.Writer.Hold).
	hold      bool
	heldBytes int
}

// target is where a call's request goes on this tunnel; infoSize is the encoded size of info (when the
// tunnel bounds what it sends); whole is what request.WholeRequest says of the call.
func (t *Tunnel) target(info *rpc.ConnectResponse, infoSize, whole int) *tunnelTarget {
	tt := &tunnelTarget{t: t, info: info, messages: whole}
	if service, method, err := grpctool.SplitMethod(info.GetRequestInfo().GetMethodName()); err == nil && t.desc.OneRequest(service, method) {
		tt.messages = 1
	}
	// A batch must fit where its parts fit: request_info may take nearly all of a tunnel message.
	tt.hold = tt.messages > 0 && t.out.Batches && (t.maxSend <= 0 || infoSize+rpc.BatchMaxBytes+batchOverhead <= t.maxSend)
	return tt
}

func (tt *tunnelTarget) Begin() error {
	if tt.hold {
		tt.t.out.Hold(tt.info)
		return nil
	}
	return tt.t.out.Send(tt.info)
}

func (tt *tunnelTarget) Send(f request.Frame) error {
	if f.End {
		return tt.t.out.Send(closeSendMsg)
	}
	if tt.hold && tt.messages > 0 && tt.heldBytes+len(f.Data) <= rpc.BatchMaxBytes {
		// The request as announced; a message more (a caller that breaks the method's shape), or more
		// than a batch takes, goes at once, after what is held. A pooled message is held with a
		// reference of the writer's own: the pump frees its own once Send returns.
		tt.messages--
		tt.heldBytes += len(f.Data)
		if f.Buf != nil {
			tt.t.out.HoldShared(&rpc.SharedResponseMessage{Buf: f.Buf})
			return nil
		}
		tt.t.out.Hold(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: f.Data}}})
		return nil
	}
	tt.hold = false
	if f.Buf != nil {
		// It goes at once, after what is held; the write takes a reference of its own.
		return tt.t.out.SendShared(&rpc.SharedResponseMessage{Buf: f.Buf})
	}
	return tt.t.out.Send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: f.Data}}})
}

// callEndMsg is kas's call_end, with why kas ended the call early (a completed call's goes through
// HoldCallEnd).
func callEndMsg(why error) *rpc.ConnectResponse {
	return &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CallEnd{CallEnd: &rpc.CallEnd{Status: status.Convert(why).Proto()}}}
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
