package load

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tunnelbench/tunnelbench/core/demo"
)

// Shape is the kind of call a load makes to the demo service.
type Shape string

// Shapes.
const (
	// ShapeUnary: Echo with a payload of the given size each way.
	ShapeUnary Shape = "unary"
	// ShapeServerStream: ServerStream of StreamMessages responses of the given size.
	ShapeServerStream Shape = "server-stream"
	// ShapeClientStream: ClientStream of StreamMessages requests of the given size.
	ShapeClientStream Shape = "client-stream"
	// ShapeBidi: one ping-pong of the given size on a stream each worker keeps open.
	ShapeBidi Shape = "bidi"
	// ShapeSleep: Sleep for SleepTime; measures what waiting calls cost.
	ShapeSleep Shape = "sleep"
)

// Shape parameters.
const (
	StreamMessages = 16
	SleepTime      = 10 * time.Millisecond
)

// ParseShape parses "unary", "server-stream", ...
func ParseShape(s string) (Shape, error) {
	switch sh := Shape(s); sh {
	case ShapeUnary, ShapeServerStream, ShapeClientStream, ShapeBidi, ShapeSleep:
		return sh, nil
	}
	return "", fmt.Errorf("unknown shape %q (want unary, server-stream, client-stream, bidi or sleep)", s)
}

// NewShapeCall is the call factory of a shape with payload bytes on conn; meta decorates each call's
// context (with the routing agent id, say). Bench's cases and the chaos runner's load make their calls
// with it.
func NewShapeCall(shape Shape, payload int, conn grpc.ClientConnInterface, meta func(context.Context) context.Context) NewCall {
	s := shapeCall{c: demo.NewDemoClient(conn), payload: payload, body: make([]byte, payload), meta: meta}
	switch shape {
	case ShapeServerStream:
		return s.serverStream
	case ShapeClientStream:
		return s.clientStream
	case ShapeBidi:
		return s.bidi
	case ShapeSleep:
		return s.sleep
	default:
		return s.unary
	}
}

// shapeCall makes the calls of one shape; each method is the NewCall of its shape.
type shapeCall struct {
	c       demo.DemoClient
	payload int
	body    []byte
	meta    func(context.Context) context.Context
}

func (s shapeCall) unary() Call {
	return func(ctx context.Context) (int, error) {
		m, err := s.c.Echo(s.meta(ctx), &demo.EchoRequest{Payload: s.body, ResponseSize: uint32(s.payload)})
		return s.payload + len(m.GetPayload()), err
	}
}

func (s shapeCall) serverStream() Call {
	return func(ctx context.Context) (int, error) {
		st, err := s.c.ServerStream(s.meta(ctx), &demo.StreamRequest{Count: StreamMessages, ResponseSize: uint32(s.payload)})
		if err != nil {
			return 0, err
		}
		n := 0
		for {
			m, err := st.Recv()
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			n += len(m.GetPayload())
		}
	}
}

func (s shapeCall) clientStream() Call {
	return func(ctx context.Context) (int, error) {
		st, err := s.c.ClientStream(s.meta(ctx))
		if err != nil {
			return 0, err
		}
		for range StreamMessages {
			if err := st.Send(&demo.EchoRequest{Payload: s.body}); err != nil {
				break // the status comes from CloseAndRecv
			}
		}
		resp, err := st.CloseAndRecv()
		return int(resp.GetBytes()), err
	}
}

// bidi keeps one stream per worker (per Call) open across calls, and opens a new one after a failure.
func (s shapeCall) bidi() Call {
	var stream grpc.BidiStreamingClient[demo.EchoRequest, demo.EchoResponse]
	return func(ctx context.Context) (int, error) {
		if stream == nil {
			st, err := s.c.Chat(s.meta(ctx))
			if err != nil {
				return 0, err
			}
			stream = st
		}
		if err := stream.Send(&demo.EchoRequest{Payload: s.body}); err != nil {
			_, err = stream.Recv()
			stream = nil
			return 0, streamErr(err)
		}
		m, err := stream.Recv()
		if err != nil {
			stream = nil
			return 0, streamErr(err)
		}
		return s.payload + len(m.GetPayload()), nil
	}
}

func (s shapeCall) sleep() Call {
	return func(ctx context.Context) (int, error) {
		_, err := s.c.Sleep(s.meta(ctx), &demo.SleepRequest{Duration: durationpb.New(SleepTime)})
		return 0, err
	}
}

func streamErr(err error) error {
	if err == io.EOF || err == nil {
		return status.Error(codes.Unavailable, "stream ended early")
	}
	return err
}
