package serverstream

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// Sender is the agent's end of a tunnel as far as a Stream writes to it:
// rpc.ReverseTunnel_ConnectClient.
type Sender interface {
	Send(*rpc.ConnectRequest) error
}

// Holder is a Sender that can hold what is sent from now on until the call's end leaves with it.
type Holder interface {
	Hold()
}

// Stream is the grpc.ServerStream of a call served from the tunnel. Only the handler's goroutine sends;
// header and trailer may be set from any goroutine. The goroutine that reads the tunnel hands the
// request over with Deliver and CloseRequest; once the handler returned, Finish sends its answer's end.
type Stream struct {
	ctx    context.Context
	cancel context.CancelFunc // cancels ctx
	stream Sender
	method string
	maxMsg int
	recv   *requestQueue

	mu         sync.Mutex
	header     metadata.MD
	trailer    metadata.MD
	headerSent bool
}

var _ grpc.ServerStream = (*Stream)(nil)

// New returns the stream of a call of method that kas sent through tunnel. The handler's context is ctx
// with md as the incoming metadata, the tunnel as peer, and this stream for grpc.SetHeader and the
// like; cancel must cancel ctx (a failed send ends the call, as on a grpc.Server). Messages larger than
// maxMsg are refused both ways.
func New(ctx context.Context, cancel context.CancelFunc, tunnel Sender, method string, md metadata.MD, maxMsg int) *Stream {
	s := &Stream{
		cancel: cancel,
		stream: tunnel,
		method: method,
		maxMsg: maxMsg,
		recv:   newRequestQueue(Window),
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	ctx = peer.NewContext(ctx, tunnelPeer)
	s.ctx = grpc.NewContextWithServerTransportStream(ctx, (*transportStream)(s))
	return s
}

// Deliver hands a request message to the handler, waiting while Window bytes wait for it already;
// once handlerDone is closed it drops data instead, so that the tunnel is read to the end of the call.
// pooled, when set, is the buffer of grpctool.PayloadPool that data is: it goes back once the handler
// decoded the message (a handler that takes it raw keeps it, and leaves it to the garbage collector).
func (s *Stream) Deliver(data []byte, pooled *[]byte, handlerDone <-chan struct{}) {
	s.recv.push(grpctool.RawFrame{Data: data, Pooled: pooled}, handlerDone)
}

// CloseRequest marks the end of the request (kas's close_send): RecvMsg returns io.EOF after the last
// message.
func (s *Stream) CloseRequest() {
	s.recv.close()
}

func (s *Stream) Context() context.Context { return s.ctx }

func (s *Stream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setHeaderLocked(md)
}

func (s *Stream) SendHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.setHeaderLocked(md); err != nil {
		return err
	}
	return s.sendHeaderLocked()
}

// setHeaderLocked adds md to the header unless it was sent. s.mu must be held.
func (s *Stream) setHeaderLocked(md metadata.MD) error {
	if s.headerSent {
		return status.Error(codes.Internal, "transport: the stream is done or the header was already sent")
	}
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *Stream) SetTrailer(md metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = metadata.Join(s.trailer, md)
}

// sendHeaderLocked sends the header once. s.mu must be held.
func (s *Stream) sendHeaderLocked() error {
	if s.headerSent {
		return nil
	}
	s.headerSent = true
	return s.sendErr(s.stream.Send(headerMsg(s.header)))
}

// sendErr is what the handler learns of a failed send: as on a grpc.Server, the call has ended, and its
// context is done before the handler hears of it.
func (s *Stream) sendErr(err error) error {
	if err == nil {
		return nil
	}
	if s.ctx.Err() != nil {
		return status.FromContextError(s.ctx.Err()).Err()
	}
	s.cancel()
	return status.Error(codes.Canceled, "the call ended: kas closed the tunnel")
}

func (s *Stream) SendMsg(m any) error {
	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	data, pooled, err := encode(m, s.maxMsg)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	if len(data) > s.maxMsg {
		return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", len(data), s.maxMsg)
	}
	s.mu.Lock()
	err = s.sendHeaderLocked()
	s.mu.Unlock()
	switch {
	case err != nil:
		if pooled != nil {
			grpctool.PayloadPool.Put(pooled)
		}
		return err
	case pooled != nil:
		return s.sendErr(rpc.SendPooledOn(s.stream, &rpc.PooledMessage{Data: pooled, Pool: grpctool.PayloadPool}))
	}
	return s.sendErr(s.stream.Send(&rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Message{Message: &rpc.Message{Data: data}}}))
}

// encode encodes m as one message. A protobuf message of grpctool.MediumMin bytes or more (and no larger
// than maxMsg) goes into a buffer of grpctool.PayloadPool, returned as pooled too: sent as an
// rpc.PooledMessage (in a batch or alone), gRPC puts it back once written, as gRPC's own codec does, so
// that an answer costs no new memory per call. Anything else is encoded as grpctool.MarshalFrame does,
// with pooled nil.
func encode(m any, maxMsg int) (data []byte, pooled *[]byte, err error) {
	if pm, ok := m.(proto.Message); ok {
		if size := grpctool.ProtoSize(pm); size >= grpctool.MediumMin && size <= maxMsg {
			if buf, err := grpctool.ProtoMarshalPooled(pm, size); err == nil {
				return *buf, buf, nil
			}
			// Refused, or the message changed while it was encoded: encode it as any other.
		}
	}
	data, err = grpctool.MarshalFrame(m)
	return data, nil, err
}

// RecvMsg decodes the next request message into m. A pooled message goes back to its pool once decoded
// (protobuf copies what it keeps); one taken raw is the handler's to keep.
func (s *Stream) RecvMsg(m any) error {
	f, err := s.recv.pop(s.ctx)
	if err != nil {
		return err
	}
	defer f.Release()
	if len(f.Data) > s.maxMsg {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", len(f.Data), s.maxMsg)
	}
	if raw, ok := m.(*grpctool.RawFrame); ok {
		raw.Data, raw.Pooled = f.Data, nil
		f.Pooled = nil // the handler keeps the data
		return nil
	}
	if err := grpctool.UnmarshalFrame(f.Data, m); err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return nil
}

// Finish sends the end of the call once the handler returned err: header (unless nothing but an error
// is to be said), trailer and err, which becomes a status as grpc.Server makes it one. It sends no
// call_end: how the call ends on the tunnel is the caller's.
func (s *Stream) Finish(err error) {
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
		_ = s.stream.Send(ErrorMsg(st.Err()))
		return
	}
	if s.sendHeaderLocked() != nil {
		return
	}
	if s.stream.Send(trailerMsg(s.trailer)) != nil {
		return
	}
	if st != nil {
		_ = s.stream.Send(ErrorMsg(st.Err()))
	}
}

// HoldAnswer passes the handler's word that the rest of its answer is at hand (grpctool.HoldAnswer) to a
// Sender that can hold it until the handler returned; other Senders send as before.
func (s *transportStream) HoldAnswer() {
	if h, ok := s.stream.(Holder); ok {
		h.Hold()
	}
}

// transportStream is what grpc.SetHeader, grpc.SendHeader, grpc.SetTrailer and
// grpc.MethodFromServerStream find in the handler's context.
type transportStream Stream

func (s *transportStream) Method() string { return s.method }

func (s *transportStream) SetHeader(md metadata.MD) error {
	return (*Stream)(s).SetHeader(md)
}

func (s *transportStream) SendHeader(md metadata.MD) error {
	return (*Stream)(s).SendHeader(md)
}

func (s *transportStream) SetTrailer(md metadata.MD) error {
	(*Stream)(s).SetTrailer(md)
	return nil
}
