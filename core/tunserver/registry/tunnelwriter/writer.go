package tunnelwriter

import (
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// Stream is where a Writer writes: a tunnel's Connect stream.
type Stream interface {
	Send(*rpc.ConnectResponse) error
}

// Writer is kas's sending half of one tunnel. The zero Writer with Stream set is ready.
type Writer struct {
	// Stream is set once, before the first Send.
	Stream Stream

	mu     sync.Mutex
	closed atomic.Bool
	// endHeld: kas's call_end of the last call is still to be sent (see HoldCallEnd); endFlush sends it
	// when no other message does first. Both guarded by mu.
	endHeld  bool
	endFlush *time.Timer
}

// ErrClosed is what Send returns once the Connect handler has finished (or is finishing).
var ErrClosed = status.Error(codes.Unavailable, "tunnel closed")

// callEndOK is kas's call_end of a completed call, built once: protobuf messages are safe to marshal
// from several goroutines at once.
var callEndOK = &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CallEnd{CallEnd: &rpc.CallEnd{}}}

// Send writes one message to the agent unless the Connect handler has finished (or is finishing). A held
// call_end goes first.
func (w *Writer) Send(m *rpc.ConnectResponse) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return ErrClosed
	}
	if w.endHeld {
		w.endHeld = false
		if err := w.Stream.Send(callEndOK); err != nil {
			return err
		}
	}
	return w.Stream.Send(m)
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
func (w *Writer) HoldCallEnd() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endHeld = true
	if w.endFlush == nil {
		w.endFlush = time.AfterFunc(CallEndDelay, w.flushCallEnd)
		return
	}
	w.endFlush.Reset(CallEndDelay)
}

// flushCallEnd sends a call_end that is still held. A failed send is the stream's end, which the
// reader reports.
func (w *Writer) flushCallEnd() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.endHeld || w.closed.Load() {
		return
	}
	w.endHeld = false
	_ = w.Stream.Send(callEndOK)
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

// stopFlushLocked stops a pending flush of a held call_end: the stream ends without it (the agent then
// takes the tunnel for ended, whatever its state). w.mu must be held.
func (w *Writer) stopFlushLocked() {
	if w.endFlush != nil {
		w.endFlush.Stop()
	}
}
