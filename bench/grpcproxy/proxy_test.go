package grpcproxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/bench/grpcproxy"
	"github.com/tunnelbench/tunnelbench/core/demo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve serves s on loopback TCP until the test ends and returns a connection to it.
func serve(t *testing.T, s *grpc.Server) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l)
	}()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		s.Stop()
		<-done
	})
	return conn
}

// echoMetadata makes the backend answer every call's "x-test" metadata in its header and trailer.
func echoMetadata(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-test"); len(v) > 0 {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-header", v[0]))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", v[0]))
	}
}

// proxied is a demo client through a proxy in front of a demo server, both on loopback TCP.
func proxied(t *testing.T) demo.DemoClient {
	t.Helper()
	backend := grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			echoMetadata(ctx)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			echoMetadata(ss.Context())
			return h(srv, ss)
		}))
	demo.Register(backend)
	backendConn := serve(t, backend)
	proxy := grpc.NewServer(grpcproxy.ServerOptions()...)
	grpcproxy.Register(proxy, &demo.Demo_ServiceDesc, backendConn)
	return demo.NewDemoClient(serve(t, proxy))
}

func TestEveryShapeGoesThrough(t *testing.T) {
	c := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	payload := bytes.Repeat([]byte("p"), 100<<10)

	var header, trailer metadata.MD
	resp, err := c.Echo(metadata.AppendToOutgoingContext(ctx, "x-test", "unary"), &demo.EchoRequest{Message: "hi", Payload: payload}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil || resp.GetMessage() != "hi" || !bytes.Equal(resp.GetPayload(), payload) {
		t.Fatalf("echo: %q, %d bytes, %v", resp.GetMessage(), len(resp.GetPayload()), err)
	}
	if header.Get("x-header")[0] != "unary" || trailer.Get("x-trailer")[0] != "unary" {
		t.Fatalf("echo: header %v, trailer %v; want the backend's", header, trailer)
	}

	ss, err := c.ServerStream(metadata.AppendToOutgoingContext(ctx, "x-test", "stream"), &demo.StreamRequest{Count: 3, ResponseSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		m, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || len(m.GetPayload()) != 10 {
			t.Fatalf("server stream message %d: %d bytes, %v", n, len(m.GetPayload()), err)
		}
		n++
	}
	if h, _ := ss.Header(); n != 3 || h.Get("x-header")[0] != "stream" || ss.Trailer().Get("x-trailer")[0] != "stream" {
		t.Fatalf("server stream: %d messages, header %v, trailer %v; want 3 and the backend's", n, h, ss.Trailer())
	}

	cs, err := c.ClientStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := cs.Send(&demo.EchoRequest{Payload: payload[:1000]}); err != nil {
			t.Fatal(err)
		}
	}
	if sum, err := cs.CloseAndRecv(); err != nil || sum.GetMessages() != 4 || sum.GetBytes() != 4000 {
		t.Fatalf("client stream: %v, %v; want 4 messages of 4000 bytes", sum, err)
	}

	chat, err := c.Chat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := chat.Send(&demo.EchoRequest{Message: "m"}); err != nil {
			t.Fatal(err)
		}
		if m, err := chat.Recv(); err != nil || m.GetMessage() != "m" {
			t.Fatalf("chat reply %d: %v, %v", i, m, err)
		}
	}
	if err := chat.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("chat end: %v, want EOF", err)
	}
}

// The backend's status reaches the caller as it was, from a unary and from a streaming method; a caller
// that cancels ends the backend's call too.
func TestStatusesGoThrough(t *testing.T) {
	c := proxied(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Echo(ctx, &demo.EchoRequest{ResponseSize: demo.MaxResponseSize + 1})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() == "" {
		t.Fatalf("echo: %v, want the backend's InvalidArgument", err)
	}
	ss, err := c.ServerStream(ctx, &demo.StreamRequest{Count: demo.MaxStreamCount + 1})
	if err == nil {
		_, err = ss.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("server stream: %v, want the backend's InvalidArgument", err)
	}

	sctx, scancel := context.WithCancel(ctx)
	chat, err := c.Chat(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := chat.Send(&demo.EchoRequest{Message: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := chat.Recv(); err != nil {
		t.Fatal(err)
	}
	scancel()
	if _, err := chat.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled chat: %v, want Canceled", err)
	}
}
