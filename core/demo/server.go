// Package demo is the demo service that agentk serves out of the box and that the benchmark harness
// drives: echo, server stream, client stream, ping-pong and sleep, with sizes and delays chosen by the
// caller.
//
// It holds no state between calls and never allocates more than the caller asked for (bounded by
// MaxResponseSize).
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MaxResponseSize bounds the payload a caller may ask for in one response.
const MaxResponseSize = 64 << 20

// MaxStreamCount bounds the number of responses of one ServerStream call.
const MaxStreamCount = 1_000_000

// Server implements the Demo service.
type Server struct {
	UnimplementedDemoServer
}

// Register registers the demo service on r.
func Register(r grpc.ServiceRegistrar) {
	RegisterDemoServer(r, &Server{})
}

func payloadFor(req *EchoRequest) ([]byte, error) {
	if req.GetResponseSize() == 0 {
		return req.GetPayload(), nil
	}
	if req.GetResponseSize() > MaxResponseSize {
		return nil, status.Errorf(codes.InvalidArgument, "response_size %d is above the limit of %d bytes", req.GetResponseSize(), MaxResponseSize)
	}
	return make([]byte, req.GetResponseSize()), nil
}

// Echo implements DemoServer.
func (Server) Echo(_ context.Context, req *EchoRequest) (*EchoResponse, error) {
	p, err := payloadFor(req)
	if err != nil {
		return nil, err
	}
	return &EchoResponse{Message: req.GetMessage(), Payload: p}, nil
}

// ServerStream implements DemoServer.
func (Server) ServerStream(req *StreamRequest, stream grpc.ServerStreamingServer[EchoResponse]) error {
	if req.GetCount() > MaxStreamCount {
		return status.Errorf(codes.InvalidArgument, "count %d is above the limit of %d", req.GetCount(), MaxStreamCount)
	}
	if req.GetResponseSize() > MaxResponseSize {
		return status.Errorf(codes.InvalidArgument, "response_size %d is above the limit of %d bytes", req.GetResponseSize(), MaxResponseSize)
	}
	interval := req.GetInterval().AsDuration()
	p := make([]byte, req.GetResponseSize())
	for i := range req.GetCount() {
		if i > 0 && interval > 0 {
			if err := sleep(stream.Context(), interval); err != nil {
				return err
			}
		}
		if err := stream.Send(&EchoResponse{Message: fmt.Sprint(i), Payload: p}); err != nil {
			return err
		}
	}
	return nil
}

// ClientStream implements DemoServer.
func (Server) ClientStream(stream grpc.ClientStreamingServer[EchoRequest, EchoResponse]) error {
	var msgs, n uint64
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&EchoResponse{Messages: msgs, Bytes: n})
		}
		if err != nil {
			return err
		}
		msgs++
		n += uint64(len(req.GetPayload()))
	}
}

// Chat implements DemoServer.
func (Server) Chat(stream grpc.BidiStreamingServer[EchoRequest, EchoResponse]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p, err := payloadFor(req)
		if err != nil {
			return err
		}
		if err := stream.Send(&EchoResponse{Message: req.GetMessage(), Payload: p}); err != nil {
			return err
		}
	}
}

// Sleep implements DemoServer.
func (Server) Sleep(ctx context.Context, req *SleepRequest) (*EchoResponse, error) {
	if err := sleep(ctx, req.GetDuration().AsDuration()); err != nil {
		return nil, err
	}
	return &EchoResponse{Message: "slept " + req.GetDuration().AsDuration().String()}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}
