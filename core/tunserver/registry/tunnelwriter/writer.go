package tunnelwriter

import (
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// Stream is where a Writer writes: a tunnel's Connect stream.
type Stream interface {
	Send(*rpc.ConnectResponse) error
	// SendMsg sends a message that encodes itself as a ConnectResponse (rpc.SharedResponseMessage).
	SendMsg(m any) error
}

// Writer is kas's sending half of one tunnel. The zero Writer with Stream set is ready.
type Writer struct {
	// Stream is set once, before the first Send.
	Stream Stream
	// Batches: the agent takes rpc.ResponseBatch (a batched tunnel). Set once, before the first Send.
	Batches bool

	mu     sync.Mutex
	closed atomic.Bool
	// ended: End was called; nothing is sent after its message.
	ended atomic.Bool
	// held are messages still to be sent (see HoldCallEnd and Hold); flush sends them when no other
	// message does first. Both guarded by mu.
	held []*rpc.ConnectResponse
	// heldBufs[i], when set, is a reference to the shared buffer held[i]'s payload is (HoldShared), which
	// the write of held[i] takes over; nil when no held message has one. Guarded by mu.
	heldBufs []mem.Buffer
	flush    *time.Timer
}

// ErrClosed is what Send returns once the Connect handler has finished (or is finishing).
var ErrClosed = status.Error(codes.Unavailable, "tunnel closed")

// callEndOK is kas's call_end of a completed call, built once: protobuf messages are safe to marshal
// from several goroutines at once.
var callEndOK = &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CallEnd{CallEnd: &rpc.CallEnd{}}}

// Send writes one message to the agent unless the Connect handler has finished (or is finishing). Held
// messages go first: on a batched tunnel in one batch with m, unless m is too large to batch.
func (w *Writer) Send(m *rpc.ConnectResponse) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() || w.ended.Load() {
		return ErrClosed
	}
	if len(w.held) > 0 && w.Batches && batchable(m) {
		held, bufs := w.takeHeldLocked()
		return w.sendLocked(append(held, m), bufs)
	}
	if err := w.flushLocked(); err != nil {
		return err
	}
	return w.Stream.Send(m)
}

// SendShared is Send for a call's message whose data others hold references to (see
// rpc.SharedResponseMessage): it goes alone, after what is held, and its write takes a reference of its
// own. It is never held, as the sender frees its reference once SendShared returns.
func (w *Writer) SendShared(m *rpc.SharedResponseMessage) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() || w.ended.Load() {
		return ErrClosed
	}
	if err := w.flushLocked(); err != nil {
		return err
	}
	return w.Stream.SendMsg(m)
}

// flushLocked sends what is held, if anything. w.mu must be held.
func (w *Writer) flushLocked() error {
	if len(w.held) == 0 {
		return nil
	}
	return w.sendLocked(w.takeHeldLocked())
}

// takeHeldLocked returns the held messages and their buffers (see heldBufs), which are held no more.
// w.mu must be held.
func (w *Writer) takeHeldLocked() ([]*rpc.ConnectResponse, []mem.Buffer) {
	held, bufs := w.held, w.heldBufs
	w.held, w.heldBufs = nil, nil
	return held, bufs
}

// sendLocked sends msgs: in one batch on a batched tunnel, one by one otherwise. bufs[i], when set, is
// a reference to the shared buffer msgs[i]'s payload is, which the write takes over (bufs may be shorter
// than msgs, or nil). w.mu must be held.
func (w *Writer) sendLocked(msgs []*rpc.ConnectResponse, bufs []mem.Buffer) error {
	if w.Batches && len(msgs) > 1 {
		if bufs != nil {
			return w.Stream.SendMsg(&rpc.SharedResponseBatch{Msgs: msgs, Bufs: bufs})
		}
		return w.Stream.Send(batch(msgs))
	}
	for i, m := range msgs {
		if i < len(bufs) && bufs[i] != nil {
			// The write takes a reference of its own.
			err := w.Stream.SendMsg(&rpc.SharedResponseMessage{Buf: bufs[i]})
			bufs[i].Free()
			if err != nil {
				return err
			}
			continue
		}
		if err := w.Stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

func batch(msgs []*rpc.ConnectResponse) *rpc.ConnectResponse {
	return &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Batch{Batch: &rpc.ResponseBatch{Msgs: msgs}}}
}

// batchable: m is small enough to go in a batch (a larger payload goes alone, never copied).
func batchable(m *rpc.ConnectResponse) bool {
	x, ok := m.GetMsg().(*rpc.ConnectResponse_Message)
	return !ok || len(x.Message.GetData()) <= rpc.BatchMaxBytes
}

// CallEndDelay is how long kas may hold the call_end of a call that completed (the agent's answer is
// all in) before sending it alone. Held, it leaves in the same write as the next call's request_info
// when that call comes sooner, as it does under load: on a link of a few microseconds every write and
// wake-up counts, and a call through kas's public API saves one of its six. The agent's view of the
// tunnel does not change: it is busy until kas's call_end, so the agent may open its next spare tunnel
// up to this much later. Far below any agent's drain timeout (10 s by default).
const CallEndDelay = time.Millisecond

// HoldCallEnd sends kas's call_end of a completed call with the tunnel's next message, or after
// CallEndDelay.
func (w *Writer) HoldCallEnd() { w.Hold(callEndOK) }

// Hold sends m with the tunnel's next message, after whatever is held already, or after CallEndDelay
// when no message comes first. On a batched tunnel the start of a call whose caller sends one request
// waits so, for its message and close_send to make one batch with it (a caller slower than
// CallEndDelay only loses the batch).
func (w *Writer) Hold(m *rpc.ConnectResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holdLocked(m, nil)
}

// HoldShared is Hold for a call's message whose data others hold references to (see
// rpc.SharedResponseMessage): the writer takes a reference of its own until the message is written, so
// that a medium request can leave in one batch with its call's start and end as a small one does.
func (w *Writer) HoldShared(m *rpc.SharedResponseMessage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m.Buf.Ref()
	w.holdLocked(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: m.Buf.ReadOnlyData()}}}, m.Buf)
}

// holdLocked holds m, whose payload is all of buf when buf is set (a reference the write takes over).
// w.mu must be held.
func (w *Writer) holdLocked(m *rpc.ConnectResponse, buf mem.Buffer) {
	if w.ended.Load() {
		if buf != nil {
			buf.Free()
		}
		return
	}
	if buf != nil && w.heldBufs == nil {
		w.heldBufs = make([]mem.Buffer, len(w.held), len(w.held)+4)
	}
	w.held = append(w.held, m)
	if w.heldBufs != nil {
		w.heldBufs = append(w.heldBufs, buf)
	}
	if w.flush == nil {
		w.flush = time.AfterFunc(CallEndDelay, w.flushHeld)
		return
	}
	w.flush.Reset(CallEndDelay)
}

// flushHeld sends what is still held. A failed send is the stream's end, which the reader reports.
func (w *Writer) flushHeld() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() || w.ended.Load() {
		return
	}
	_ = w.flushLocked()
}

// End sends m, the tunnel's last message, after what is held, on a goroutine of its own: the caller
// may hold locks that a send blocked on flow control must not hold up. Nothing is sent after it. Like
// every send it ends at Close at the latest (see Close).
func (w *Writer) End(m *rpc.ConnectResponse) {
	if w.ended.Swap(true) {
		return
	}
	go func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.closed.Load() {
			return
		}
		w.stopFlushLocked()
		held, bufs := w.takeHeldLocked()
		_ = w.sendLocked(append(held, m), bufs)
	}()
}

// closeWait bounds how long the Connect handler waits for a send in progress before it returns.
const closeWait = time.Second

// Close forbids further sends and waits for a send in progress, at most closeWait: after it the Connect
// handler may return. A send still in progress then is blocked on flow control by an agent that stopped
// reading, and only the handler's return ends the stream and so that send (gRPC's SendMsg returns once
// the stream is done): waiting for it would leave the tunnel, its call and this handler to the agent's
// mercy.
func (w *Writer) Close() {
	w.closed.Store(true)
	if w.mu.TryLock() { // no send in progress: the common case
		w.stopFlushLocked()
		w.mu.Unlock()
		return
	}
	sent := make(chan struct{})
	go func() {
		w.mu.Lock()
		w.stopFlushLocked()
		w.mu.Unlock()
		close(sent)
	}()
	timer := time.NewTimer(closeWait)
	defer timer.Stop()
	select {
	case <-sent:
	case <-timer.C:
	}
}

// stopFlushLocked stops a pending flush of held messages: the stream ends without them (the agent then
// takes the tunnel for ended, whatever its state). w.mu must be held.
func (w *Writer) stopFlushLocked() {
	if w.flush != nil {
		w.flush.Stop()
	}
}
