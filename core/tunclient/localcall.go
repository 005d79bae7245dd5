package tunclient

import (
	"context"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// localWindow is how many request bytes may wait for the service before the tunnel stops reading and
// gRPC flow control holds kas back: the stream window a grpc.Server would give the call.
const localWindow = grpctool.StreamWindow

// serveLocal serves a call of a service registered on the agent with the tunnel itself as the service's
// server stream: the handler reads request messages that this goroutine takes off the tunnel, and writes
// header, messages, trailer and status straight onto it. Compared with replaying the call on a
// grpc.Server behind bufconn, no HTTP/2 framing, copy or goroutine hand-off sits between tunnel and
// service. It returns when the handler returned and kas ended its side of the call, reporting whether
// the tunnel can take another call.
func (a *Agent) serveLocal(ctx context.Context, cancelCall context.CancelFunc, md metadata.MD, tc tunnelCall, method string) bool {
	ss := &tunnelServerStream{
		cancel: cancelCall,
		stream: tc.stream,
		method: method,
		maxMsg: a.cfg.MaxMessageSize,
		recv:   newRequestQueue(localWindow),
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	ctx = peer.NewContext(ctx, tunnelPeer)
	ss.ctx = grpc.NewContextWithServerTransportStream(ctx, (*tunnelTransportStream)(ss))

	handlerDone := make(chan struct{})
	var drainTimer *time.Timer
	var oursSent bool
	drain := tc.drain
	go func() {
		ss.finish(a.mux.Handle(nil, ss))
		oursSent = tc.endOurs() == nil
		// kas ends its side as soon as it has the answer; if it does not, stop waiting after the
		// drain timeout.
		drainTimer = time.AfterFunc(drain, tc.cancelStream)
		close(handlerDone)
	}()

	// kas -> service, on this goroutine, until kas's end of the call: after the answer, or early when the
	// caller cancelled, in which case the handler's context is cancelled too.
	ended, why := tc.kasSide(func(m *rpc.ConnectResponse) {
		switch x := m.GetMsg().(type) {
		case *rpc.ConnectResponse_Message:
			// After the handler returned nobody reads: the queue drops the rest, and reading goes on so
			// that kas is never blocked.
			ss.recv.push(x.Message.GetData(), handlerDone)
		case *rpc.ConnectResponse_CloseSend:
			ss.recv.close()
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

// Most calls answer with an empty header and trailer: those messages are built once. Protobuf messages
// are safe to marshal from several goroutines at once.
var (
	emptyHeaderMsg  = &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Header{Header: &rpc.Header{}}}
	emptyTrailerMsg = &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Trailer{Trailer: &rpc.Trailer{}}}
)

func headerMsg(md metadata.MD) *rpc.ConnectRequest {
	if len(md) == 0 {
		return emptyHeaderMsg
	}
	return &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Header{Header: &rpc.Header{Meta: rpc.MetaToValues(md)}}}
}

func trailerMsg(md metadata.MD) *rpc.ConnectRequest {
	if len(md) == 0 {
		return emptyTrailerMsg
	}
	return &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Trailer{Trailer: &rpc.Trailer{Meta: rpc.MetaToValues(md)}}}
}

// tunnelPeer is what peer.FromContext tells a service about its caller: the call came through a tunnel
// from kas (the caller's own address stays with kas).
var tunnelPeer = &peer.Peer{Addr: tunnelAddr{}, LocalAddr: tunnelAddr{}}

type tunnelAddr struct{}

func (tunnelAddr) Network() string { return "tunnel" }
func (tunnelAddr) String() string  { return "kas" }

// tunnelServerStream is the grpc.ServerStream of a call served from the tunnel. Only the handler's
// goroutine sends; header and trailer may be set from any goroutine.
type tunnelServerStream struct {
	ctx    context.Context
	cancel context.CancelFunc // cancels ctx
	stream rpc.ReverseTunnel_ConnectClient
	method string
	maxMsg int
	recv   *requestQueue

	mu         sync.Mutex
	header     metadata.MD
	trailer    metadata.MD
	headerSent bool
}

var _ grpc.ServerStream = (*tunnelServerStream)(nil)

func (s *tunnelServerStream) Context() context.Context { return s.ctx }

func (s *tunnelServerStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setHeaderLocked(md)
}

func (s *tunnelServerStream) SendHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.setHeaderLocked(md); err != nil {
		return err
	}
	return s.sendHeaderLocked()
}

// setHeaderLocked adds md to the header unless it was sent. s.mu must be held.
func (s *tunnelServerStream) setHeaderLocked(md metadata.MD) error {
	if s.headerSent {
		return status.Error(codes.Internal, "transport: the stream is done or the header was already sent")
	}
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *tunnelServerStream) SetTrailer(md metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = metadata.Join(s.trailer, md)
}

// sendHeaderLocked sends the header once. s.mu must be held.
func (s *tunnelServerStream) sendHeaderLocked() error {
	if s.headerSent {
		return nil
	}
	s.headerSent = true
	return s.sendErr(s.stream.Send(headerMsg(s.header)))
}

// sendErr is what the handler learns of a failed send: as on a grpc.Server, the call has ended, and its
// context is done before the handler hears of it.
func (s *tunnelServerStream) sendErr(err error) error {
	if err == nil {
		return nil
	}
	if s.ctx.Err() != nil {
		return status.FromContextError(s.ctx.Err()).Err()
	}
	s.cancel()
	return status.Error(codes.Canceled, "the call ended: kas closed the tunnel")
}

func (s *tunnelServerStream) SendMsg(m any) error {
	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	data, err := grpctool.MarshalFrame(m)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	if len(data) > s.maxMsg {
		return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", len(data), s.maxMsg)
	}
	s.mu.Lock()
	err = s.sendHeaderLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.sendErr(s.stream.Send(&rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Message{Message: &rpc.Message{Data: data}}}))
}

func (s *tunnelServerStream) RecvMsg(m any) error {
	data, err := s.recv.pop(s.ctx)
	if err != nil {
		return err
	}
	if len(data) > s.maxMsg {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", len(data), s.maxMsg)
	}
	if err := grpctool.UnmarshalFrame(data, m); err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return nil
}

// finish sends the end of the call: header (unless nothing but an error is to be said), trailer and
// the handler's error, which becomes a status as grpc.Server makes it one.
func (s *tunnelServerStream) finish(err error) {
	var st *status.Status
	if err != nil {
		var ok bool
		if st, ok = status.FromError(err); !ok {
			st = status.FromContextError(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st != nil && !s.headerSent && len(s.header) == 0 && len(s.trailer) == 0 {
		// Trailers only: descriptor -> error.
		s.headerSent = true
		_ = s.stream.Send(errorMsg(st.Err()))
		return
	}
	if s.sendHeaderLocked() != nil {
		return
	}
	if s.stream.Send(trailerMsg(s.trailer)) != nil {
		return
	}
	if st != nil {
		_ = s.stream.Send(errorMsg(st.Err()))
	}
}

// tunnelTransportStream is what grpc.SetHeader, grpc.SendHeader, grpc.SetTrailer and
// grpc.MethodFromServerStream find in the handler's context.
type tunnelTransportStream tunnelServerStream

func (s *tunnelTransportStream) Method() string { return s.method }

func (s *tunnelTransportStream) SetHeader(md metadata.MD) error {
	return (*tunnelServerStream)(s).SetHeader(md)
}

func (s *tunnelTransportStream) SendHeader(md metadata.MD) error {
	return (*tunnelServerStream)(s).SendHeader(md)
}

func (s *tunnelTransportStream) SetTrailer(md metadata.MD) error {
	(*tunnelServerStream)(s).SetTrailer(md)
	return nil
}

// requestQueue holds request messages between the tunnel and the handler, up to a number of bytes. Up
// to that bound the tunnel keeps reading while the handler is busy, so that the end of the call (the
// caller cancelled) reaches the handler's context even when it is not reading, as it would on a
// grpc.Server; beyond it the tunnel stops reading and flow control holds kas back.
type requestQueue struct {
	limit int

	mu     sync.Mutex
	items  [][]byte
	bytes  int
	closed bool          // close_send arrived: after the items, io.EOF
	ready  chan struct{} // one token: items were added or the queue closed
	space  chan struct{} // one token: bytes went down
}

// queueCost is what a message counts against the bound: empty messages are not free.
func queueCost(data []byte) int {
	return len(data) + 64
}

func newRequestQueue(limit int) *requestQueue {
	return &requestQueue{limit: limit, ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push adds data, waiting while the queue is full; once done is closed (the handler returned) it drops
// data instead.
func (q *requestQueue) push(data []byte, done <-chan struct{}) {
	for {
		q.mu.Lock()
		// One message always fits, however large: the bound is on what waits behind it.
		if q.bytes == 0 || q.bytes+queueCost(data) <= q.limit {
			q.items = append(q.items, data)
			q.bytes += queueCost(data)
			q.mu.Unlock()
			signal(q.ready)
			return
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-done:
			return
		}
	}
}

// close marks the end of the request.
func (q *requestQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.ready)
}

// pop takes the next message: io.EOF after the last one, a status when ctx ends first.
func (q *requestQueue) pop(ctx context.Context) ([]byte, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			data := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			q.bytes -= queueCost(data)
			q.mu.Unlock()
			signal(q.space)
			return data, nil
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, io.EOF
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}
