// Package testsvc is the gRPC test service that tests call through the tunnel: grpc.testing.TestService
// (the interop test service of grpc-go) with hooks that let a test see what reached the service.
//
// It is test support only; production code never imports it.
package testsvc

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Metadata keys the service echoes, as in the gRPC interop tests.
const (
	EchoInitialKey  = "x-grpc-test-echo-initial"
	EchoTrailingKey = "x-grpc-test-echo-trailing-bin"
)

// Seen is what one call brought to the service.
type Seen struct {
	Method      string
	Metadata    metadata.MD
	Deadline    time.Time
	HasDeadline bool
	// Err is the call context's error when the handler returned: Canceled when the caller cancelled.
	Err error
}

// Server implements grpc.testing.TestService.
type Server struct {
	testgrpc.UnimplementedTestServiceServer

	mu   sync.Mutex
	seen []Seen
	// started receives the method of every call as it starts; nil unless Watch was called.
	started chan string
}

// Register registers a new Server on r.
func Register(r grpc.ServiceRegistrar) *Server {
	s := &Server{}
	testgrpc.RegisterTestServiceServer(r, s)
	return s
}

// Seen returns what every finished call brought.
func (s *Server) Seen() []Seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Seen(nil), s.seen...)
}

// Watch returns a channel that receives the method name of each call as it starts.
func (s *Server) Watch() <-chan string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started == nil {
		s.started = make(chan string, 1024)
	}
	return s.started
}

func (s *Server) begin(ctx context.Context, method string) func() {
	md, _ := metadata.FromIncomingContext(ctx)
	dl, ok := ctx.Deadline()
	s.mu.Lock()
	ch := s.started
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- method:
		default:
		}
	}
	echo(ctx, md)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seen = append(s.seen, Seen{Method: method, Metadata: md.Copy(), Deadline: dl, HasDeadline: ok, Err: ctx.Err()})
	}
}

// echo sends the echo-initial key back in the header and the echo-trailing key in the trailer.
func echo(ctx context.Context, md metadata.MD) {
	if v := md.Get(EchoInitialKey); len(v) > 0 {
		_ = grpc.SetHeader(ctx, metadata.Pairs(EchoInitialKey, v[0]))
	}
	if v := md.Get(EchoTrailingKey); len(v) > 0 {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(EchoTrailingKey, v[0]))
	}
}

// statusErr is the status the request asks for, with details so tests can check they survive.
func statusErr(st *testpb.EchoStatus) error {
	if st == nil || st.GetCode() == 0 {
		return nil
	}
	s := status.New(codes.Code(st.GetCode()), st.GetMessage())
	if d, err := s.WithDetails(&errdetails.ErrorInfo{Reason: "ECHO", Domain: "tunnelbench.test", Metadata: map[string]string{"code": codes.Code(st.GetCode()).String()}}); err == nil {
		s = d
	}
	return s.Err()
}

func payload(size int32) *testpb.Payload {
	if size <= 0 {
		return nil
	}
	return &testpb.Payload{Body: make([]byte, size)}
}

// EmptyCall returns an empty message.
func (s *Server) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	defer s.begin(ctx, "EmptyCall")()
	return &testpb.Empty{}, nil
}

// UnaryCall answers with response_size bytes, or the requested status.
func (s *Server) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	defer s.begin(ctx, "UnaryCall")()
	if err := statusErr(in.GetResponseStatus()); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{Payload: payload(in.GetResponseSize())}, nil
}

// StreamingOutputCall sends one response per response_parameters entry, sleeping interval_us before
// each; it stops early when the caller cancels.
func (s *Server) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, stream testgrpc.TestService_StreamingOutputCallServer) error {
	ctx := stream.Context()
	defer s.begin(ctx, "StreamingOutputCall")()
	for _, p := range in.GetResponseParameters() {
		if err := sleep(ctx, time.Duration(p.GetIntervalUs())*time.Microsecond); err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: payload(p.GetSize())}); err != nil {
			return err
		}
	}
	return statusErr(in.GetResponseStatus())
}

// StreamingInputCall sums the payload sizes of every request.
func (s *Server) StreamingInputCall(stream testgrpc.TestService_StreamingInputCallServer) error {
	defer s.begin(stream.Context(), "StreamingInputCall")()
	var total int32
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: total})
		}
		if err != nil {
			return err
		}
		total += int32(len(in.GetPayload().GetBody()))
	}
}

// FullDuplexCall answers each request as it arrives (ping-pong), then the requested status.
func (s *Server) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	ctx := stream.Context()
	defer s.begin(ctx, "FullDuplexCall")()
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := statusErr(in.GetResponseStatus()); err != nil {
			return err
		}
		for _, p := range in.GetResponseParameters() {
			if err := sleep(ctx, time.Duration(p.GetIntervalUs())*time.Microsecond); err != nil {
				return err
			}
			if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: payload(p.GetSize())}); err != nil {
				return err
			}
		}
	}
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
