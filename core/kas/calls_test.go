package kas_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
	"github.com/tunnelbench/tunnelbench/internal/testsvc"
)

// callers are the two ways into kas: over the public API and in process through the internal API.
func callers(e *testenv.Env) map[string]testgrpc.TestServiceClient {
	return map[string]testgrpc.TestServiceClient{
		"public":   testgrpc.NewTestServiceClient(e.Public),
		"internal": testgrpc.NewTestServiceClient(e.Kas.InternalConn()),
	}
}

// variant is one way a call crosses kas and the agent: kas's listeners on TCP or bufconn, the agent
// serving its services straight from the tunnel (the default) or on a grpc.Server behind bufconn, and
// tunnels that carry call after call (the default) or one call each, and the agent's connection to kas
// on h2conn (the default) or gRPC-go's ClientConn.
type variant struct {
	transport     testenv.Transport
	bufconnServer bool
	singleUse     bool
	grpcClient    bool
}

// options sets the variant on o.
func (v variant) options(o testenv.Options) testenv.Options {
	o.Transport = v.transport
	o.GRPCClient = o.GRPCClient || v.grpcClient
	if v.bufconnServer || v.singleUse {
		inner := o.Agent
		o.Agent = func(id int64, c *tunclient.Config) {
			if inner != nil {
				inner(id, c)
			}
			c.BufconnServer = c.BufconnServer || v.bufconnServer
			c.SingleUse = c.SingleUse || v.singleUse
		}
	}
	return o
}

func forEachVariant(t *testing.T, f func(t *testing.T, v variant)) {
	for name, v := range map[string]variant{
		"tcp":                  {transport: testenv.TCP},
		"bufconn":              {transport: testenv.Bufconn},
		"agent-bufconn-server": {transport: testenv.TCP, bufconnServer: true},
		"single-use":           {transport: testenv.TCP, singleUse: true},
		"single-use-bufconn":   {transport: testenv.TCP, bufconnServer: true, singleUse: true},
		"grpc-client":          {transport: testenv.TCP, grpcClient: true},
		"grpc-client-single":   {transport: testenv.TCP, grpcClient: true, singleUse: true},
	} {
		t.Run(name, func(t *testing.T) { f(t, v) })
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCallShapes(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := testenv.Start(t, v.options(testenv.Options{}))
		for name, c := range callers(e) {
			t.Run(name, func(t *testing.T) {
				ctx := testenv.AgentCtx(testCtx(t), 1)

				resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 1000, Payload: &testpb.Payload{Body: []byte("ping")}})
				if err != nil {
					t.Fatalf("unary: %v", err)
				}
				if got := len(resp.GetPayload().GetBody()); got != 1000 {
					t.Fatalf("unary: %d bytes, want 1000", got)
				}
				if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
					t.Fatalf("empty: %v", err)
				}

				cs, err := c.StreamingInputCall(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range []int{10, 200, 3000} {
					if err := cs.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, n)}}); err != nil {
						t.Fatal(err)
					}
				}
				sum, err := cs.CloseAndRecv()
				if err != nil || sum.GetAggregatedPayloadSize() != 3210 {
					t.Fatalf("client stream: %v, %d", err, sum.GetAggregatedPayloadSize())
				}

				ss, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 2}, {Size: 3}, {Size: 4}}})
				if err != nil {
					t.Fatal(err)
				}
				var sizes []int
				for {
					m, err := ss.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("server stream: %v", err)
					}
					sizes = append(sizes, len(m.GetPayload().GetBody()))
				}
				if len(sizes) != 4 || sizes[3] != 4 {
					t.Fatalf("server stream sizes %v", sizes)
				}

				bidi, err := c.FullDuplexCall(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for i := 1; i <= 5; i++ {
					if err := bidi.Send(&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: int32(i)}}}); err != nil {
						t.Fatal(err)
					}
					m, err := bidi.Recv()
					if err != nil || len(m.GetPayload().GetBody()) != i {
						t.Fatalf("ping-pong %d: %v", i, err)
					}
				}
				if err := bidi.CloseSend(); err != nil {
					t.Fatal(err)
				}
				if _, err := bidi.Recv(); !errors.Is(err, io.EOF) {
					t.Fatalf("bidi end: %v", err)
				}
			})
		}
	})
}

func TestMetadataBothWays(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := testenv.Start(t, v.options(testenv.Options{}))
		for name, c := range callers(e) {
			t.Run(name, func(t *testing.T) {
				bin := string([]byte{0, 1, 2, 255})
				ctx := testenv.AgentCtx(testCtx(t), 1,
					testsvc.EchoInitialKey, "initial-value",
					testsvc.EchoTrailingKey, bin,
					"x-custom", "custom-value",
				)
				var hdr, trl metadata.MD
				if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl)); err != nil {
					t.Fatal(err)
				}
				if v := hdr.Get(testsvc.EchoInitialKey); len(v) != 1 || v[0] != "initial-value" {
					t.Errorf("header %v", hdr)
				}
				if v := trl.Get(testsvc.EchoTrailingKey); len(v) != 1 || v[0] != bin {
					t.Errorf("trailer %v", trl)
				}
				// Streaming too: header before the first message, trailer after the last.
				ss, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1}}})
				if err != nil {
					t.Fatal(err)
				}
				h, err := ss.Header()
				if err != nil || h.Get(testsvc.EchoInitialKey)[0] != "initial-value" {
					t.Fatalf("stream header %v %v", h, err)
				}
				for {
					if _, err := ss.Recv(); err != nil {
						break
					}
				}
				if v := ss.Trailer().Get(testsvc.EchoTrailingKey); len(v) != 1 || v[0] != bin {
					t.Errorf("stream trailer %v", ss.Trailer())
				}
			})
		}
		seen := e.Agents[1].Service.Seen()
		if len(seen) == 0 {
			t.Fatal("service saw no call")
		}
		for _, s := range seen {
			if v := s.Metadata.Get("x-custom"); len(v) != 1 || v[0] != "custom-value" {
				t.Errorf("%s: x-custom = %v", s.Method, v)
			}
		}
	})
}

func TestStatusDetails(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := testenv.Start(t, v.options(testenv.Options{}))
		for name, c := range callers(e) {
			t.Run(name, func(t *testing.T) {
				ctx := testenv.AgentCtx(testCtx(t), 1, testsvc.EchoTrailingKey, "t")
				msg := "nicht gefunden: ünïcödé ✓"
				var trl metadata.MD
				_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.NotFound), Message: msg}}, grpc.Trailer(&trl))
				st := status.Convert(err)
				if st.Code() != codes.NotFound || st.Message() != msg {
					t.Fatalf("got %v", err)
				}
				if len(st.Details()) != 1 {
					t.Fatalf("details %v", st.Details())
				}
				if info, ok := st.Details()[0].(*errdetails.ErrorInfo); !ok || info.GetReason() != "ECHO" {
					t.Fatalf("detail %v", st.Details()[0])
				}
				if v := trl.Get(testsvc.EchoTrailingKey); len(v) != 1 {
					t.Errorf("trailer lost with the error: %v", trl)
				}
				// A status after messages on a stream.
				ss, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{
					ResponseParameters: []*testpb.ResponseParameters{{Size: 1}},
					ResponseStatus:     &testpb.EchoStatus{Code: int32(codes.Aborted), Message: "late"},
				})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ss.Recv(); err != nil {
					t.Fatal(err)
				}
				if _, err := ss.Recv(); status.Code(err) != codes.Aborted || status.Convert(err).Message() != "late" {
					t.Fatalf("stream status %v", err)
				}
			})
		}
	})
}

func TestDeadlineReachesService(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	for name, c := range callers(e) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(testenv.AgentCtx(context.Background(), 1), 7*time.Second)
			defer cancel()
			want, _ := ctx.Deadline()
			if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
				t.Fatal(err)
			}
			seen := e.Agents[1].Service.Seen()
			last := seen[len(seen)-1]
			if !last.HasDeadline {
				t.Fatal("service saw no deadline")
			}
			if d := last.Deadline.Sub(want); d > 50*time.Millisecond || d < -50*time.Millisecond {
				t.Fatalf("service deadline %v, caller's %v", last.Deadline, want)
			}
		})
	}
	// A deadline that passes while the service sleeps ends the call with DeadlineExceeded on both sides.
	c := testgrpc.NewTestServiceClient(e.Public)
	ctx, cancel := context.WithTimeout(testenv.AgentCtx(context.Background(), 1), 300*time.Millisecond)
	defer cancel()
	ss, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1, IntervalUs: 5e6}}})
	if err == nil {
		_, err = ss.Recv()
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("sleeping server: %v", err)
	}
	testenv.Eventually(t, 5*time.Second, func() bool {
		for _, s := range e.Agents[1].Service.Seen() {
			if s.Method == "StreamingOutputCall" && s.Err != nil {
				return true
			}
		}
		return false
	}, "the service's context never ended")
}

func TestCancelReachesService(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		e := testenv.Start(t, v.options(testenv.Options{}))
		started := e.Agents[1].Service.Watch()
		for name, c := range callers(e) {
			t.Run(name, func(t *testing.T) {
				before := len(e.Agents[1].Service.Seen())
				ctx, cancel := context.WithCancel(testenv.AgentCtx(testCtx(t), 1))
				ss, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 1, IntervalUs: 30e6}}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ss.Recv(); err != nil {
					t.Fatal(err)
				}
				<-started
				cancel()
				if _, err := ss.Recv(); status.Code(err) != codes.Canceled {
					t.Fatalf("after cancel: %v", err)
				}
				testenv.Eventually(t, 5*time.Second, func() bool { return len(e.Agents[1].Service.Seen()) > before }, "service call never ended")
				last := e.Agents[1].Service.Seen()[before]
				if !errors.Is(last.Err, context.Canceled) {
					t.Fatalf("service context ended with %v, want canceled", last.Err)
				}
			})
		}
	})
}

// TestCancelReachesServiceThatIsNotReading: a handler that leaves the request unread while the caller
// streams, and waits on its context, still learns that the caller cancelled.
func TestCancelReachesServiceThatIsNotReading(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		started := make(chan struct{}, 2)
		ended := make(chan error, 2)
		stall := &grpc.ServiceDesc{
			ServiceName: "tunnelbench.test.Stall",
			HandlerType: (*any)(nil),
			Streams: []grpc.StreamDesc{{StreamName: "Stall", ClientStreams: true, ServerStreams: true,
				Handler: func(_ any, ss grpc.ServerStream) error {
					started <- struct{}{}
					<-ss.Context().Done()
					ended <- ss.Context().Err()
					return ss.Context().Err()
				}}},
		}
		e := testenv.Start(t, v.options(testenv.Options{Register: func(_ int64, a *tunclient.Agent) { a.RegisterService(stall, nil) }}))
		for name, conn := range map[string]grpc.ClientConnInterface{"public": e.Public, "internal": e.Kas.InternalConn()} {
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(testenv.AgentCtx(testCtx(t), 1))
				defer cancel()
				cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/tunnelbench.test.Stall/Stall", grpctool.RawCallCodec())
				if err != nil {
					t.Fatal(err)
				}
				for range 100 { // far more messages than a handler that does not read takes
					if err := cs.SendMsg(&grpctool.RawFrame{Data: make([]byte, 1024)}); err != nil {
						break
					}
				}
				select {
				case <-started:
				case <-time.After(10 * time.Second):
					t.Fatal("the handler never started")
				}
				cancel()
				select {
				case err := <-ended:
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("handler context ended with %v, want canceled", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the caller's cancel never reached a handler that does not read")
				}
			})
		}
	})
}

// TestServiceSeesAPeer: services that log or check peer.FromContext find a peer, as on a grpc.Server.
func TestServiceSeesAPeer(t *testing.T) {
	forEachVariant(t, func(t *testing.T, v variant) {
		who := &grpc.ServiceDesc{
			ServiceName: "tunnelbench.test.Peer",
			HandlerType: (*any)(nil),
			Streams: []grpc.StreamDesc{{StreamName: "Who", ClientStreams: true, ServerStreams: true,
				Handler: func(_ any, ss grpc.ServerStream) error {
					p, ok := peer.FromContext(ss.Context())
					if !ok || p.Addr == nil {
						return status.Error(codes.FailedPrecondition, "no peer in the handler's context")
					}
					return ss.SendHeader(metadata.Pairs("peer-network", p.Addr.Network()))
				}}},
		}
		e := testenv.Start(t, v.options(testenv.Options{Register: func(_ int64, a *tunclient.Agent) { a.RegisterService(who, nil) }}))
		cs, err := e.Public.NewStream(testenv.AgentCtx(testCtx(t), 1), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/tunnelbench.test.Peer/Who", grpctool.RawCallCodec())
		if err != nil {
			t.Fatal(err)
		}
		_ = cs.CloseSend()
		if err := cs.RecvMsg(&grpctool.RawFrame{}); err != io.EOF {
			t.Fatalf("call: %v", err)
		}
		if hdr, _ := cs.Header(); len(hdr.Get("peer-network")) != 1 {
			t.Fatalf("header %v: want the peer's network", hdr)
		}
	})
}

func TestLargeMessages(t *testing.T) {
	const size = 8 << 20
	forEachVariant(t, func(t *testing.T, v variant) {
		e := testenv.Start(t, v.options(testenv.Options{
			Kas:        func(c *kas.Config) { c.MaxMessageSize = 16 << 20 },
			Agent:      func(_ int64, c *tunclient.Config) { c.MaxMessageSize = 16 << 20 },
			CallerDial: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20))},
		}))
		for name, c := range callers(e) {
			t.Run(name, func(t *testing.T) {
				body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
				resp, err := c.UnaryCall(testenv.AgentCtx(testCtx(t), 1), &testpb.SimpleRequest{ResponseSize: size, Payload: &testpb.Payload{Body: body}},
					grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20))
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.GetPayload().GetBody()) != size {
					t.Fatalf("got %d bytes", len(resp.GetPayload().GetBody()))
				}
			})
		}
	})
}
