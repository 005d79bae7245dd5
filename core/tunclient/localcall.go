package tunclient

import (
	"context"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient/serverstream"
)

// serveLocal serves a call of a service registered on the agent with the tunnel itself as the service's
// server stream: the handler reads request messages that this goroutine takes off the tunnel, and writes
// header, messages, trailer and status straight onto it. Compared with replaying the call on a
// grpc.Server behind bufconn, no HTTP/2 framing, copy or goroutine hand-off sits between tunnel and
// service. It returns when the handler returned and kas ended its side of the call, reporting whether
// the tunnel can take another call.
func (a *Agent) serveLocal(ctx context.Context, cancelCall context.CancelFunc, md metadata.MD, tc tunnelCall, method string) bool {
	var out serverstream.Sender = tc.stream
	endOurs := tc.endOurs
	if tc.batches {
		// The answer (header, message, trailer, status) and the agent's call_end leave as one batch
		// when the handler returns: one gRPC message and one wake-up of kas's reader instead of four.
		// A method that may answer with several messages sends them as they come, unless its handler
		// says that the rest of its answer is at hand (grpctool.HoldAnswer).
		b := &rpc.RequestBatcher{Stream: tc.stream}
		if a.mux.AnswersOnce(method) {
			out = b
		} else {
			out = &answerSender{stream: tc.stream, batch: b}
		}
		endOurs = func() error { return tc.endOursWith(b) }
	}
	ss := serverstream.New(ctx, cancelCall, out, method, md, a.cfg.MaxMessageSize)

	handlerDone := make(chan struct{})
	var drainTimer *time.Timer
	var oursSent bool
	drain := tc.drain
	a.workers.Go(func() {
		ss.Finish(a.mux.Handle(nil, ss))
		oursSent = endOurs() == nil
		// kas ends its side as soon as it has the answer; if it does not, stop waiting after the
		// drain timeout.
		drainTimer = time.AfterFunc(drain, tc.cancelStream)
		close(handlerDone)
	})

	// kas -> service, on this goroutine, until kas's end of the call: after the answer, or early when the
	// caller cancelled, in which case the handler's context is cancelled too.
	ended, why := tc.kasSide(func(m *rpc.ConnectResponse, pooled *[]byte) {
		switch x := m.GetMsg().(type) {
		case *rpc.ConnectResponse_Message:
			// After the handler returned nobody reads: the queue drops the rest, and reading goes on so
			// that kas is never blocked.
			ss.Deliver(x.Message.GetData(), pooled, handlerDone)
		case *rpc.ConnectResponse_CloseSend:
			ss.CloseRequest()
		}
	}, func(err error) { a.cfg.Log.Warn("kas broke the tunnel protocol", "method", method, "err", err) })
	if why != nil {
		a.cfg.Log.Debug("kas ended the call early", "method", method, "reason", why)
	}
	cancelCall()
	select {
	case <-handlerDone: // the common case: the handler answered before kas ended its side
		drainTimer.Stop()
		return tc.reuse && ended && oursSent
	default:
	}
	// A handler that ignores its context's end would hold this tunnel's goroutine, and Stop, forever: it
	// costs its tunnel and nothing else.
	abandon := time.NewTimer(drain)
	defer abandon.Stop()
	select {
	case <-handlerDone:
		drainTimer.Stop()
		return tc.reuse && ended && oursSent
	case <-abandon.C:
		a.cfg.Log.Warn("a service went on after its call ended; the tunnel stopped waiting for it", "method", method)
		tc.cancelStream()
		return false
	}
}

// answerSender sends a streaming answer message by message until the handler holds the rest of it
// (serverstream.Holder); from then on messages join batch, which the call's end flushes. Only the
// handler's goroutine sends, as on every serverstream.Sender.
type answerSender struct {
	stream serverstream.Sender
	batch  *rpc.RequestBatcher
	held   bool
}

func (s *answerSender) Send(m *rpc.ConnectRequest) error {
	if s.held {
		return s.batch.Send(m)
	}
	return s.stream.Send(m)
}

func (s *answerSender) Hold() { s.held = true }

func (s *answerSender) SendPooled(m *rpc.PooledMessage) error {
	if s.held {
		return s.batch.SendPooled(m)
	}
	return rpc.SendPooledOn(s.stream, m)
}
