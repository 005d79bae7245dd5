package h2conn_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/core/tunclient/h2conn"
	"github.com/tunnelbench/tunnelbench/internal/testcerts"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait of these tests.
const testTimeout = 20 * time.Second

// server is a gRPC-go server of the interop test service: FullDuplexCall echoes each payload (and
// answers a payload of "fail" with a status carrying details, header and trailer metadata),
// UnaryCall echoes the request's payload and reports the deadline it saw.
type server struct {
	testgrpc.UnimplementedTestServiceServer
	mu        sync.Mutex
	deadline  time.Duration
	cancelled chan struct{}
}

func (s *server) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			stream.SetTrailer(metadata.Pairs("trailer-key", "t"))
			return nil
		}
		if err != nil {
			if s.cancelled != nil && status.Code(err) == codes.Canceled {
				close(s.cancelled)
			}
			return err
		}
		if string(m.GetPayload().GetBody()) == "fail" {
			_ = stream.SetHeader(metadata.Pairs("header-key", "h", "header-bin", "\x00\xff"))
			stream.SetTrailer(metadata.Pairs("trailer-bin", "\x01\x02"))
			st, _ := status.New(codes.FailedPrecondition, "not now: 100% busy\n").WithDetails(&errdetails.ErrorInfo{Reason: "BUSY"})
			return st.Err()
		}
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: m.GetPayload()}); err != nil {
			return err
		}
	}
}

func (s *server) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if d, ok := ctx.Deadline(); ok {
		s.mu.Lock()
		s.deadline = time.Until(d)
		s.mu.Unlock()
	}
	if md, _ := metadata.FromIncomingContext(ctx); len(md["echo-bin"]) > 0 {
		_ = grpc.SetHeader(ctx, metadata.Pairs("echo-bin", md["echo-bin"][0]))
	}
	return &testgrpc.SimpleResponse{Payload: req.GetPayload()}, nil
}

// start serves s on a loopback listener with opts and returns its address.
func start(t *testing.T, s *server, opts ...grpc.ServerOption) (string, *grpc.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String(), srv
}

func dial(t *testing.T, addr string, o h2conn.Options) *h2conn.Conn {
	t.Helper()
	c, err := h2conn.New(addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func payload(n int) *testgrpc.Payload {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return &testgrpc.Payload{Body: b}
}

// TestStreamsAcrossWindows echoes messages from 0 bytes to several times both sides' flow-control
// windows, on several streams at once, so that each direction waits for window updates.
func TestStreamsAcrossWindows(t *testing.T) {
	addr, _ := start(t, &server{}, grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10))
	c := dial(t, addr, h2conn.Options{StreamWindow: 64 << 10, ConnectionWindow: 128 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := testgrpc.NewTestServiceClient(c).FullDuplexCall(ctx)
			if err != nil {
				errs <- err
				return
			}
			for _, n := range []int{0, 1, 5, 16 << 10, 100 << 10, 1 << 20, 3 << 20} {
				want := payload(n)
				if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: want}); err != nil {
					errs <- err
					return
				}
				got, err := s.Recv()
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got.GetPayload().GetBody(), want.Body) {
					errs <- errors.New("echo differs")
					return
				}
			}
			if err := s.CloseSend(); err != nil {
				errs <- err
				return
			}
			if _, err := s.Recv(); err != io.EOF {
				errs <- err
				return
			}
			if s.Trailer()["trailer-key"][0] != "t" {
				errs <- errors.New("no trailer")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestStatusAndMetadata: a status with details and a message that needs escaping, binary header and
// trailer metadata, and request metadata that reaches the server.
func TestStatusAndMetadata(t *testing.T) {
	addr, _ := start(t, &server{})
	c := dial(t, addr, h2conn.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := testgrpc.NewTestServiceClient(c).FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte("fail")}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || st.Message() != "not now: 100% busy\n" {
		t.Fatalf("status %v, want FailedPrecondition with the server's message", err)
	}
	if d := st.Details(); len(d) != 1 || d[0].(*errdetails.ErrorInfo).GetReason() != "BUSY" {
		t.Fatalf("details %v", st.Details())
	}
	h, err := s.Header()
	if err != nil || h.Get("header-key")[0] != "h" || h.Get("header-bin")[0] != "\x00\xff" {
		t.Fatalf("header %v, %v", h, err)
	}
	if tr := s.Trailer(); tr.Get("trailer-bin")[0] != "\x01\x02" {
		t.Fatalf("trailer %v", tr)
	}

	var header metadata.MD
	octx := metadata.AppendToOutgoingContext(ctx, "echo-bin", "\x00bin\xff")
	if _, err := testgrpc.NewTestServiceClient(c).UnaryCall(octx, &testgrpc.SimpleRequest{}, grpc.Header(&header)); status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "grpc.HeaderCallOption") {
		t.Fatalf("a call option this connection does not take: %v, want Internal naming it", err)
	}
	cs, err := c.NewStream(octx, &grpc.StreamDesc{}, "/grpc.testing.TestService/UnaryCall")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(&testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(&testgrpc.SimpleResponse{}); err != nil {
		t.Fatal(err)
	}
	if h, _ := cs.Header(); h.Get("echo-bin")[0] != "\x00bin\xff" {
		t.Fatalf("the server did not get the binary metadata: %v", h)
	}
}

// TestLimits: messages over the call's limits either way, a deadline the server sees, and a
// deadline that passes.
func TestLimits(t *testing.T) {
	srv := &server{}
	addr, _ := start(t, srv, grpc.MaxRecvMsgSize(1<<10))
	c := dial(t, addr, h2conn.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	client := testgrpc.NewTestServiceClient(c)

	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload(100)}, grpc.MaxCallRecvMsgSize(10))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("response over the receive limit: %v", err)
	}
	_, err = client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload(100)}, grpc.MaxCallSendMsgSize(10))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("request over the send limit: %v", err)
	}
	_, err = client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload(2 << 10)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("request over the server's limit: %v", err)
	}

	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	if _, err := client.UnaryCall(dctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	seen := srv.deadline
	srv.mu.Unlock()
	if seen <= 0 || seen > 5*time.Second {
		t.Fatalf("the server saw a deadline %v away, want up to 5s", seen)
	}
	past, pcancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer pcancel()
	if _, err := client.UnaryCall(past, &testgrpc.SimpleRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a past deadline: %v", err)
	}
}

// TestCancel: cancelling a stream resets it (the server's handler sees it end) and frees its slot
// under the server's stream limit.
func TestCancel(t *testing.T) {
	srv := &server{cancelled: make(chan struct{})}
	addr, _ := start(t, srv, grpc.MaxConcurrentStreams(1))
	c := dial(t, addr, h2conn.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	sctx, scancel := context.WithCancel(ctx)
	s, err := testgrpc.NewTestServiceClient(c).FullDuplexCall(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	scancel()
	if _, err := s.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}
	select {
	case <-srv.cancelled:
	case <-ctx.Done():
		t.Fatal("the server's handler never saw the stream end")
	}
	// The one slot is free again.
	if _, err := testgrpc.NewTestServiceClient(c).UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
}

// TestGoAwayAndReconnect: a server's graceful stop lets the open stream finish, and the next stream
// dials the next server at the same address.
func TestGoAwayAndReconnect(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, &server{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	c := dial(t, addr, h2conn.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := testgrpc.NewTestServiceClient(c).FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		srv.GracefulStop()
	}()
	time.Sleep(50 * time.Millisecond) // the GOAWAY reaches the client; the stream is still served
	if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("the open stream after GOAWAY: %v", err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatal(err)
	}
	<-stopped
	<-served

	lis2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address was taken meanwhile: %v", err)
	}
	addr2, _ := startOn(t, lis2)
	if addr2 != addr {
		t.Fatal("another address")
	}
	if _, err := testgrpc.NewTestServiceClient(c).UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatalf("after the server came back: %v", err)
	}
}

func startOn(t *testing.T, lis net.Listener) (string, *grpc.Server) {
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, &server{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String(), srv
}

// TestKeepaliveBlackHole: a server that accepted the connection and then says nothing (a black hole)
// fails the stream within the keepalive time and timeout.
func TestKeepaliveBlackHole(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var conns sync.WaitGroup
	defer conns.Wait()
	var held []net.Conn
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		for _, nc := range held {
			_ = nc.Close()
		}
		mu.Unlock()
	}()
	conns.Go(func() {
		nc, err := lis.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		held = append(held, nc)
		mu.Unlock()
		_, _ = io.Copy(io.Discard, nc)
	})
	c := dial(t, lis.Addr().String(), h2conn.Options{KeepaliveTime: 100 * time.Millisecond, KeepaliveTimeout: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := testgrpc.NewTestServiceClient(c).FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "keepalive") {
		t.Fatalf("a black hole: %v, want Unavailable from the keepalive", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the keepalive did not end the stream; the test's timeout did")
	}
}

// TestTLS: over TLS with mutual authentication and per-call credentials; without TLS, credentials that
// require it are refused.
func TestTLS(t *testing.T) {
	certs := testcerts.New(t)
	serverCert, err := tlsfiles.NewReloader(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tlsfiles.NewReloader(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := start(t, &server{}, grpc.Creds(credentials.NewTLS(tlsfiles.Server(serverCert, certs.Pool))))
	creds := tokenCreds("secret")
	c := dial(t, addr, h2conn.Options{TLS: tlsfiles.Client(certs.Pool, "", clientCert), Credentials: creds})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := testgrpc.NewTestServiceClient(c).UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: payload(10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h2conn.New(addr, h2conn.Options{Credentials: creds}); err == nil || !strings.Contains(err.Error(), "require transport security") {
		t.Fatalf("credentials that need TLS on a plaintext connection: %v", err)
	}
	plain := dial(t, addr, h2conn.Options{})
	if _, err := testgrpc.NewTestServiceClient(plain).UnaryCall(ctx, &testgrpc.SimpleRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext to a TLS server: %v, want Unavailable", err)
	}
}

type tokenCreds string

func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(c)}, nil
}
func (tokenCreds) RequireTransportSecurity() bool { return true }

// TestNotGRPC: an HTTP/2 server that is not gRPC's answers with an HTTP status, mapped as gRPC maps it.
func TestNotGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.NotFoundHandler(), Protocols: new(http.Protocols)}
	hs.Protocols.SetUnencryptedHTTP2(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(lis)
	}()
	defer func() {
		_ = hs.Close()
		<-done
	}()
	c := dial(t, lis.Addr().String(), h2conn.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err = testgrpc.NewTestServiceClient(c).UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a 404: %v, want Unimplemented", err)
	}
}

// TestClose ends open streams and refuses new ones; the server's keepalive enforcement is not
// offended by an idle connection.
func TestClose(t *testing.T) {
	addr, _ := start(t, &server{}, grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second}))
	c, err := h2conn.New(addr, h2conn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := testgrpc.NewTestServiceClient(c).FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Canceled && status.Code(err) != codes.Unavailable {
		t.Fatalf("a stream of a closed connection: %v", err)
	}
	if _, err := testgrpc.NewTestServiceClient(c).UnaryCall(ctx, &testgrpc.SimpleRequest{}); status.Code(err) != codes.Canceled {
		t.Fatalf("a call on a closed connection: %v", err)
	}
}

// TestBadTarget names what it refuses.
func TestBadTarget(t *testing.T) {
	for _, target := range []string{"", "unix:///tmp/s", "dns:///"} {
		if _, err := h2conn.New(target, h2conn.Options{}); err == nil || !strings.Contains(err.Error(), "not host:port") {
			t.Errorf("target %q: %v", target, err)
		}
	}
	if _, err := h2conn.New("127.0.0.1:1", h2conn.Options{StreamWindow: 10}); err == nil {
		t.Error("a window below HTTP/2's initial one was taken")
	}
}
