package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/core/demo"
)

// Shape is the kind of call a case makes.
type Shape string

// Shapes.
const (
	// ShapeUnary: Echo with a payload of the case's size each way.
	ShapeUnary Shape = "unary"
	// ShapeServerStream: ServerStream of StreamMessages responses of the case's size.
	ShapeServerStream Shape = "server-stream"
	// ShapeClientStream: ClientStream of StreamMessages requests of the case's size.
	ShapeClientStream Shape = "client-stream"
	// ShapeBidi: one ping-pong of the case's size on a stream each worker keeps open.
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

// newCall returns the call factory for shape with payload bytes, on conn, with ctx decorated by meta.
func newCall(shape Shape, payload int, conn grpc.ClientConnInterface, meta func(context.Context) context.Context) load.NewCall {
	c := demo.NewDemoClient(conn)
	body := make([]byte, payload)
	switch shape {
	case ShapeServerStream:
		return func() load.Call {
			return func(ctx context.Context) (int, error) {
				s, err := c.ServerStream(meta(ctx), &demo.StreamRequest{Count: StreamMessages, ResponseSize: uint32(payload)})
				if err != nil {
					return 0, err
				}
				n := 0
				for {
					m, err := s.Recv()
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
	case ShapeClientStream:
		return func() load.Call {
			return func(ctx context.Context) (int, error) {
				s, err := c.ClientStream(meta(ctx))
				if err != nil {
					return 0, err
				}
				for range StreamMessages {
					if err := s.Send(&demo.EchoRequest{Payload: body}); err != nil {
						break // the status comes from CloseAndRecv
					}
				}
				resp, err := s.CloseAndRecv()
				return int(resp.GetBytes()), err
			}
		}
	case ShapeBidi:
		return func() load.Call {
			var stream grpc.BidiStreamingClient[demo.EchoRequest, demo.EchoResponse]
			return func(ctx context.Context) (int, error) {
				if stream == nil {
					s, err := c.Chat(meta(ctx))
					if err != nil {
						return 0, err
					}
					stream = s
				}
				if err := stream.Send(&demo.EchoRequest{Payload: body}); err != nil {
					_, err = stream.Recv()
					stream = nil
					return 0, streamErr(err)
				}
				m, err := stream.Recv()
				if err != nil {
					stream = nil
					return 0, streamErr(err)
				}
				return payload + len(m.GetPayload()), nil
			}
		}
	case ShapeSleep:
		return func() load.Call {
			return func(ctx context.Context) (int, error) {
				_, err := c.Sleep(meta(ctx), &demo.SleepRequest{Duration: durationpb.New(SleepTime)})
				return 0, err
			}
		}
	default:
		return func() load.Call {
			return func(ctx context.Context) (int, error) {
				m, err := c.Echo(meta(ctx), &demo.EchoRequest{Payload: body, ResponseSize: uint32(payload)})
				return payload + len(m.GetPayload()), err
			}
		}
	}
}

func streamErr(err error) error {
	if err == io.EOF || err == nil {
		return status.Error(codes.Unavailable, "stream ended early")
	}
	return err
}

// FormatBytes writes sizes the way case names use them: 64B, 1KiB, 1MiB.
func FormatBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// ParseBytes parses 64, 64B, 1KiB, 1MiB (case-insensitive, K/M accepted for KiB/MiB).
func ParseBytes(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	for _, suf := range []struct {
		s string
		m int
	}{{"mib", 1 << 20}, {"kib", 1 << 10}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1}} {
		if strings.HasSuffix(t, suf.s) {
			t, mult = strings.TrimSuffix(t, suf.s), suf.m
			break
		}
	}
	var n int
	if _, err := fmt.Sscanf(t, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != t {
		return 0, fmt.Errorf("size %q: want a number of bytes such as 64, 1KiB or 1MiB", s)
	}
	return n * mult, nil
}

// NewShapeCall is the call factory of a shape with payload bytes on conn; meta decorates each call's
// context (with the routing agent id, say). The chaos runner drives its load with it.
func NewShapeCall(shape Shape, payload int, conn grpc.ClientConnInterface, meta func(context.Context) context.Context) load.NewCall {
	return newCall(shape, payload, conn, meta)
}
