package gateway

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// serveHop serves a hop stream (rpc.KasHopMethod): the routing kas's calls one after another, each
// served by Handle as if it had a gateway stream of its own. Two goroutines serve it whatever its
// calls: this one runs each call, a reader takes the routing kas's messages and hands them to the call
// under way. It returns between calls when kas drains (the routing kas opens a new stream elsewhere),
// and at once when the routing kas ends the stream or breaks the protocol.
func (g *Handler) serveHop(stream grpc.ServerStream) error {
	if err := stream.SendHeader(hopHeader); err != nil {
		return err
	}
	r := &hopReader{stream: stream, starts: make(chan *hopCall), failed: make(chan struct{})}
	go r.run()
	ctx := stream.Context()
	for {
		var c *hopCall
		select {
		case c = <-r.starts:
		case <-r.failed:
			return r.err
		case <-g.draining:
			// Between calls only: the routing kas's next start, if one is on its way, was not read, and an
			// OK end without call_end tells it so (it sends the call elsewhere).
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		err := g.serveCall(c)
		c.finish()
		if err := stream.SendMsg(callEnd(err, c.trailer)); err != nil {
			return err
		}
	}
}

var hopHeader = metadata.Pairs(rpc.GatewayEagerKey, "1", rpc.GatewayReuseKey, "1")

// callEnd is the call_end that reports err (nil: OK) and trailer.
func callEnd(err error, trailer metadata.MD) *rpc.GatewayResponse {
	end := &rpc.HopCallEnd{Status: status.Convert(err).Proto(), Trailer: rpc.MetaToValues(trailer)}
	return &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_CallEnd{CallEnd: end}}
}

// hopReader reads a hop stream: each start becomes a call for serveHop, the messages after it go to that
// call, and whatever arrives once the call is over (the rest of a request its handler did not read) is
// dropped until the next start.
type hopReader struct {
	stream grpc.ServerStream
	starts chan *hopCall
	// failed is closed, err set, when the stream ended or broke the protocol.
	failed chan struct{}
	err    error
	cur    *hopCall
}

func (r *hopReader) run() {
	r.err = r.read()
	if r.cur != nil {
		r.cur.cancel() // the stream is over: so is its call
	}
	close(r.failed)
}

func (r *hopReader) read() error {
	ctx := r.stream.Context()
	for {
		f := grpctool.RawFrame{KeepShared: true}
		if err := r.stream.RecvMsg(&f); err != nil {
			if err == io.EOF {
				return nil // the routing kas is done with the stream
			}
			return err
		}
		payload, isMessage, start, closeSend, err := rpc.ParseHopRequest(f.Data)
		if err != nil {
			return err
		}
		c := r.cur
		switch {
		case start != nil:
			if c != nil && !c.over() {
				return status.Error(codes.InvalidArgument, "hop stream: a call started before the previous one's call_end")
			}
			c = newHopCall(ctx, r.stream, start)
			r.cur = c
			select {
			case r.starts <- c:
			case <-ctx.Done():
				c.finish()
				return nil
			}
		case c == nil:
			return status.Error(codes.InvalidArgument, "hop stream: a message before the first start")
		case c.over():
			// The rest of a call that ended.
		case closeSend:
			c.closeSend()
		case isMessage:
			c.deliver(sharedPayload(f, payload))
		}
	}
}

// hopMessage is a message of a call's request. buf, when set, is a buffer counted by references that
// data is all of (a message of grpctool.MediumMin bytes or more, received shared): its one reference
// goes to whoever takes the message.
type hopMessage struct {
	data []byte
	buf  mem.Buffer
}

// sharedPayload is payload, a message envelope's payload at the end of f's data, with a reference of its
// own to f's shared buffer when f has one, and f's reference given up. Anything else of f's (a payload
// not at its end) leaves f's buffer to the garbage collector: a slice of it may still be read.
func sharedPayload(f grpctool.RawFrame, payload []byte) hopMessage {
	if f.Shared == nil {
		return hopMessage{data: payload}
	}
	n := len(f.Data)
	if len(payload) == 0 || &payload[len(payload)-1] != &f.Data[n-1] {
		return hopMessage{data: payload}
	}
	m := hopMessage{data: payload, buf: f.Shared.Slice(n-len(payload), n)}
	f.Shared.Free()
	return m
}

func (m hopMessage) free() {
	if m.buf != nil {
		m.buf.Free()
	}
}

// hopCall is one call of a hop stream as a gateway stream of its own (a grpc.ServerStream for Handle):
// its method, metadata and deadline from the start, its request from the hop reader, its answer sent
// on the hop stream, its trailer kept for call_end.
type hopCall struct {
	ctx    context.Context
	cancel context.CancelFunc
	hop    grpc.ServerStream

	msgs      chan hopMessage // from the reader, one at a time
	halfClose chan struct{}   // closed at close_send
	closed    bool            // the reader's: close_send came
	done      chan struct{}   // closed when the call is over

	mu      sync.Mutex // orders sends with finish
	ended   bool
	trailer metadata.MD
}

func newHopCall(hopCtx context.Context, hop grpc.ServerStream, start *rpc.HopStart) *hopCall {
	ctx := metadata.NewIncomingContext(hopCtx, rpc.ValuesToMeta(start.GetMeta()))
	ctx = grpc.NewContextWithServerTransportStream(ctx, hopMethod(start.GetMethod()))
	c := &hopCall{hop: hop, msgs: make(chan hopMessage), halfClose: make(chan struct{}), done: make(chan struct{})}
	if start.GetDeadline() != nil {
		c.ctx, c.cancel = context.WithDeadline(ctx, start.GetDeadline().AsTime())
	} else {
		c.ctx, c.cancel = context.WithCancel(ctx)
	}
	return c
}

// deliver hands a request message to the call, once it reads it or ends.
func (c *hopCall) deliver(m hopMessage) {
	if c.closed {
		m.free()
		return // after close_send: the routing kas broke the protocol, the call never sees it
	}
	select {
	case c.msgs <- m:
	case <-c.done:
		m.free()
	}
}

func (c *hopCall) closeSend() {
	if !c.closed {
		c.closed = true
		close(c.halfClose)
	}
}

func (c *hopCall) over() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// finish ends the call: nothing more is sent for it, and its context ends.
func (c *hopCall) finish() {
	c.mu.Lock()
	if !c.ended {
		c.ended = true
		close(c.done)
	}
	c.mu.Unlock()
	c.cancel()
}

var errHopCallOver = errors.New("hop stream: the call is over")

func (c *hopCall) Context() context.Context { return c.ctx }

// SetHeader, SendHeader: the hop stream's header said everything a gateway stream's says, once.
func (c *hopCall) SetHeader(metadata.MD) error  { return nil }
func (c *hopCall) SendHeader(metadata.MD) error { return nil }

func (c *hopCall) SetTrailer(md metadata.MD) {
	c.mu.Lock()
	c.trailer = metadata.Join(c.trailer, md)
	c.mu.Unlock()
}

func (c *hopCall) SendMsg(m any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return errHopCallOver
	}
	return c.hop.SendMsg(m)
}

func (c *hopCall) RecvMsg(m any) error {
	select {
	case hm := <-c.msgs:
		// The request pump keeps a message of 1 KiB or more shared, as it does one from gRPC (see request.Frame).
		return grpctool.UnmarshalSharedFrame(hm.data, hm.buf, m)
	case <-c.halfClose:
		// Every message before close_send was taken: the reader hands them over one at a time, in order.
		return io.EOF
	case <-c.ctx.Done():
		return status.FromContextError(c.ctx.Err()).Err()
	}
}

// hopMethod gives a hop call its method, as gRPC's transport stream gives a stream's
// (grpc.MethodFromServerStream).
type hopMethod string

func (m hopMethod) Method() string                { return string(m) }
func (hopMethod) SetHeader(metadata.MD) error     { return nil }
func (hopMethod) SendHeader(metadata.MD) error    { return nil }
func (hopMethod) SetTrailer(md metadata.MD) error { return nil }
