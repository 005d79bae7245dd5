package grpctool

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	protobuf "google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/workers"
)

// inProcessWindow is how many messages may wait in each direction of an in-process stream before the
// sender blocks: the in-process equivalent of flow control.
const inProcessWindow = 8

// InProcessConn is a grpc.ClientConnInterface whose streams are served by a stream handler in the same
// process, without HTTP/2. Messages cross by pointer when both sides use RawFrame, and through the raw
// codec otherwise, exactly as on the wire. Metadata, deadlines, cancellation, header, trailer and status
// behave as over a real connection, including the grpc.Header and grpc.Trailer call options. Senders
// must not change a message after SendMsg: the receiver may hold it.
type InProcessConn struct {
	handler grpc.StreamHandler
	workers *workers.Pool // runs the streams' handlers
	wg      sync.WaitGroup
}

// NewInProcessConn returns a connection whose every stream runs handler in a goroutine of its own: one
// kept from an earlier stream when one is idle (workers.Pool).
func NewInProcessConn(handler grpc.StreamHandler) *InProcessConn {
	return &InProcessConn{handler: handler, workers: workers.New()}
}

// Wait returns when every handler started by the connection has returned.
func (c *InProcessConn) Wait() {
	c.wg.Wait()
}

// Invoke implements grpc.ClientConnInterface. The whole request is known up front, so the handler runs
// in the caller's goroutine: no goroutine is started and no message changes hands between goroutines.
func (c *InProcessConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	// One request and its end, one response and one more to detect a second: 2 slots each way.
	p, cancel := c.newPipe(ctx, method, opts, 2)
	p.inline = true
	p.c2s <- args
	close(p.c2s)
	p.clientDone = true
	// The handler may send one response without blocking (the window is larger); a second one, or more
	// than the window, is an error a unary call must not hide.
	c.wg.Add(1)
	err := c.handler(nil, &pipeServer{p: p})
	cancel()
	p.finish(err)
	c.wg.Done()
	cs := &pipeClient{p: p}
	if err := cs.RecvMsg(reply); err != nil {
		return err
	}
	if err := cs.RecvMsg(&RawFrame{}); err != io.EOF {
		if err == nil {
			return status.Error(codes.Internal, "in-process call: more than one response to a unary call")
		}
		return err
	}
	return nil
}

// NewStream implements grpc.ClientConnInterface. Of the call options only grpc.Header and grpc.Trailer
// have an effect.
func (c *InProcessConn) NewStream(ctx context.Context, _ *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	p, cancel := c.newPipe(ctx, method, opts, inProcessWindow)
	c.wg.Add(1)
	c.workers.Go(func() {
		defer c.wg.Done()
		err := c.handler(nil, &pipeServer{p: p})
		cancel()
		p.finish(err)
	})
	return &pipeClient{p: p}, nil
}

// newPipe sets up one call: the handler's context carries the caller's metadata as incoming metadata,
// the caller's deadline and cancellation, and the method name.
func (c *InProcessConn) newPipe(ctx context.Context, method string, opts []grpc.CallOption, window int) (*pipe, context.CancelFunc) {
	md, _ := metadata.FromOutgoingContext(ctx) // a copy: the handler's own
	sctx, cancel := context.WithCancel(ctx)
	sctx = metadata.NewOutgoingContext(sctx, nil)
	sctx = metadata.NewIncomingContext(sctx, md)
	p := &pipe{
		method:   method,
		c2s:      make(chan any, window),
		s2c:      make(chan any, window),
		headerCh: make(chan struct{}),
		doneCh:   make(chan struct{}),
		cctx:     ctx,
	}
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			p.headerAddr = o.HeaderAddr
		case grpc.TrailerCallOption:
			p.trailerAddr = o.TrailerAddr
		}
	}
	p.sctx = grpc.NewContextWithServerTransportStream(sctx, pipeTransportStream{p: p})
	return p, cancel
}

type pipe struct {
	method string
	cctx   context.Context
	sctx   context.Context

	c2s        chan any
	clientDone bool // CloseSend was called; only the client's sending goroutine touches it

	s2c      chan any
	sendMu   sync.Mutex // server sends vs finish
	finished bool

	headerOnce  sync.Once
	headerCh    chan struct{}
	doneCh      chan struct{}
	mdMu        sync.Mutex
	header      metadata.MD
	trailer     metadata.MD
	final       error
	done        atomic.Bool
	headerAddr  *metadata.MD
	trailerAddr *metadata.MD
	// inline: the handler runs in the caller's goroutine (Invoke), so nobody reads while it sends.
	inline bool
}

func (p *pipe) sendHeader() {
	p.headerOnce.Do(func() {
		if p.headerAddr != nil {
			p.mdMu.Lock()
			*p.headerAddr = p.header.Copy()
			p.mdMu.Unlock()
		}
		close(p.headerCh)
	})
}

func (p *pipe) finish(err error) {
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			err = status.Error(codes.Unknown, err.Error())
		}
	}
	p.sendHeader()
	p.mdMu.Lock()
	p.final = err
	if p.trailerAddr != nil {
		*p.trailerAddr = p.trailer.Copy()
	}
	p.mdMu.Unlock()
	// done before s2c closes: a caller that saw the end (RecvMsg's io.EOF or status) reads the trailer
	// at once, and Trailer must not take it for a call still running.
	p.done.Store(true)
	p.sendMu.Lock()
	p.finished = true
	close(p.s2c)
	p.sendMu.Unlock()
	close(p.doneCh)
}

// move hands src to dst: by pointer between RawFrames, through one encoding otherwise. A pooled frame's
// buffer goes back once decoded (protobuf copies what it keeps); one that moves on as a RawFrame is left
// to the garbage collector, as its receiver may keep the data.
func move(dst, src any) error {
	if s, ok := src.(*RawFrame); ok {
		if d, ok := dst.(*RawFrame); ok {
			d.Data, d.Pooled = s.Data, nil
			return nil
		}
		err := UnmarshalFrame(s.Data, dst)
		s.Release()
		if err != nil {
			return status.Errorf(codes.Internal, "in-process stream: unmarshal into %T: %v", dst, err)
		}
		return nil
	}
	if d, ok := dst.(*RawFrame); ok {
		if m, ok := src.(protobuf.Message); ok {
			if err := d.encode(m); err != nil {
				return status.Errorf(codes.Internal, "in-process stream: marshal %T: %v", src, err)
			}
			return nil
		}
	}
	data, err := MarshalFrame(src)
	if err != nil {
		return status.Errorf(codes.Internal, "in-process stream: marshal %T: %v", src, err)
	}
	if err := UnmarshalFrame(data, dst); err != nil {
		return status.Errorf(codes.Internal, "in-process stream: unmarshal into %T: %v", dst, err)
	}
	return nil
}

// encode makes f the encoding of m, sized once. A message of MediumMin bytes or more for a receiver that
// keeps it shared (kas's pump) is encoded into a pooled buffer, as gRPC's client encodes a call's
// message, which goes back once neither the pump's replay log nor a write holds it (see request.Frame).
func (f *RawFrame) encode(m protobuf.Message) error {
	size := ProtoSize(m)
	f.Pooled, f.Shared = nil, nil
	if f.KeepShared && size >= MediumMin {
		buf, err := ProtoMarshalPooled(m, size)
		if err != nil {
			return err
		}
		f.Data, f.Shared = *buf, mem.NewBuffer(buf, PayloadPool)
		return nil
	}
	data, err := ProtoMarshalAppendSized(nil, m, size)
	f.Data = data
	return err
}

type pipeClient struct {
	p *pipe
}

func (c *pipeClient) Header() (metadata.MD, error) {
	select {
	case <-c.p.headerCh:
	case <-c.p.cctx.Done():
		return nil, status.FromContextError(c.p.cctx.Err()).Err()
	}
	c.p.mdMu.Lock()
	defer c.p.mdMu.Unlock()
	return c.p.header.Copy(), nil
}

func (c *pipeClient) Trailer() metadata.MD {
	if !c.p.done.Load() {
		return nil
	}
	c.p.mdMu.Lock()
	defer c.p.mdMu.Unlock()
	return c.p.trailer.Copy()
}

func (c *pipeClient) CloseSend() error {
	if !c.p.clientDone {
		c.p.clientDone = true
		close(c.p.c2s)
	}
	return nil
}

func (c *pipeClient) Context() context.Context { return c.p.cctx }

func (c *pipeClient) SendMsg(m any) error {
	if c.p.clientDone {
		return status.Error(codes.Internal, "in-process stream: SendMsg after CloseSend")
	}
	select {
	case c.p.c2s <- m:
		return nil
	case <-c.p.sctx.Done():
		// The handler finished or the call was cancelled; as in gRPC, the status comes from RecvMsg.
		return io.EOF
	}
}

func (c *pipeClient) RecvMsg(m any) error {
	select {
	case src, ok := <-c.p.s2c:
		if !ok {
			c.p.mdMu.Lock()
			defer c.p.mdMu.Unlock()
			if c.p.final != nil {
				return c.p.final
			}
			return io.EOF
		}
		return move(m, src)
	case <-c.p.cctx.Done():
		// The handler sees the same cancellation; wait for it so that no goroutine outlives the call.
		<-c.p.doneCh
		return status.FromContextError(c.p.cctx.Err()).Err()
	}
}

type pipeServer struct {
	p *pipe
}

func (s *pipeServer) SetHeader(md metadata.MD) error {
	s.p.mdMu.Lock()
	defer s.p.mdMu.Unlock()
	select {
	case <-s.p.headerCh:
		return errors.New("in-process stream: header already sent")
	default:
	}
	s.p.header = metadata.Join(s.p.header, md)
	return nil
}

func (s *pipeServer) SendHeader(md metadata.MD) error {
	if err := s.SetHeader(md); err != nil {
		return err
	}
	s.p.sendHeader()
	return nil
}

func (s *pipeServer) SetTrailer(md metadata.MD) {
	s.p.mdMu.Lock()
	defer s.p.mdMu.Unlock()
	s.p.trailer = metadata.Join(s.p.trailer, md)
}

func (s *pipeServer) Context() context.Context { return s.p.sctx }

func (s *pipeServer) SendMsg(m any) error {
	s.p.sendHeader()
	s.p.sendMu.Lock()
	defer s.p.sendMu.Unlock()
	if s.p.finished {
		return status.Error(codes.Internal, "in-process stream: SendMsg after the handler returned")
	}
	if s.p.inline {
		select {
		case s.p.s2c <- m:
			return nil
		default:
			return status.Error(codes.Internal, "in-process unary call: the handler sent too many responses")
		}
	}
	select {
	case s.p.s2c <- m:
		return nil
	case <-s.p.sctx.Done():
		return status.FromContextError(s.p.sctx.Err()).Err()
	}
}

func (s *pipeServer) RecvMsg(m any) error {
	select {
	case src, ok := <-s.p.c2s:
		if !ok {
			return io.EOF
		}
		return move(m, src)
	case <-s.p.sctx.Done():
		return status.FromContextError(s.p.sctx.Err()).Err()
	}
}

// pipeTransportStream is what grpc.MethodFromServerStream, grpc.SetHeader and friends find in the
// handler's context.
type pipeTransportStream struct {
	p *pipe
}

func (s pipeTransportStream) Method() string { return s.p.method }

func (s pipeTransportStream) SetHeader(md metadata.MD) error {
	return (&pipeServer{p: s.p}).SetHeader(md)
}

func (s pipeTransportStream) SendHeader(md metadata.MD) error {
	return (&pipeServer{p: s.p}).SendHeader(md)
}

func (s pipeTransportStream) SetTrailer(md metadata.MD) error {
	(&pipeServer{p: s.p}).SetTrailer(md)
	return nil
}

// ChainStreamHandler wraps handler in interceptors, the first outermost, as grpc.ChainStreamInterceptor
// does on a server: in-process callers then pass through what a server's callers pass through.
func ChainStreamHandler(handler grpc.StreamHandler, interceptors ...grpc.StreamServerInterceptor) grpc.StreamHandler {
	for i := len(interceptors) - 1; i >= 0; i-- {
		next, icpt := handler, interceptors[i]
		handler = func(srv any, ss grpc.ServerStream) error {
			info := &grpc.StreamServerInfo{FullMethod: methodOf(ss), IsClientStream: true, IsServerStream: true}
			return icpt(srv, ss, info, next)
		}
	}
	return handler
}

func methodOf(ss grpc.ServerStream) string {
	m, _ := grpc.MethodFromServerStream(ss)
	return m
}
