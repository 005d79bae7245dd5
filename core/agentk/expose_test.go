package agentk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/agentk"
	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
	"github.com/tunnelbench/tunnelbench/internal/testsvc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testService = "grpc.testing.TestService"

// upstream is a real gRPC server on loopback serving the test service.
func upstream(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.MaxRecvMsgSize(8<<20), grpc.MaxSendMsgSize(8<<20))
	testsvc.Register(s)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

// startAgentk runs agentk (the library cmd/agentk runs) against e's kas, exposing expose.
func startAgentk(t *testing.T, e *testenv.Env, expose map[string]string) *agentk.Agentk {
	t.Helper()
	k, err := agentk.New(agentk.Config{KasAddress: e.Kas.Addrs().Agent.String(), Token: testenv.Token(1), Expose: expose})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k.Stop(ctx)
	})
	testenv.Eventually(t, 10*time.Second, func() bool { return e.Kas.Registry().Stats().IdleTunnels >= int64(tunclient.DefaultMinIdle) }, "agentk never connected")
	return k
}

// outcome is everything a caller can observe of a call.
type outcome struct {
	code     codes.Code
	msg      string
	details  int
	header   string
	trailer  string
	payloads []int
}

func (o outcome) String() string {
	return fmt.Sprintf("%v %q details=%d header=%q trailer=%q payloads=%v", o.code, o.msg, o.details, o.header, o.trailer, o.payloads)
}

func finish(o *outcome, err error, hdr, trl metadata.MD) outcome {
	st := status.Convert(err)
	o.code, o.msg, o.details = st.Code(), st.Message(), len(st.Details())
	if v := hdr.Get(testsvc.EchoInitialKey); len(v) > 0 {
		o.header = v[0]
	}
	if v := trl.Get(testsvc.EchoTrailingKey); len(v) > 0 {
		o.trailer = v[0]
	}
	return *o
}

func recvAll[T interface{ GetPayload() *testpb.Payload }](recv func() (T, error)) ([]int, error) {
	var sizes []int
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return sizes, nil
		}
		if err != nil {
			return sizes, err
		}
		sizes = append(sizes, len(m.GetPayload().GetBody()))
	}
}

// transparencyCases are calls that must look the same directly and through the tunnel.
var transparencyCases = map[string]func(ctx context.Context, c testgrpc.TestServiceClient) outcome{
	"empty message": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		_, err := c.EmptyCall(ctx, &testpb.Empty{})
		return finish(&o, err, nil, nil)
	},
	"empty unary payload": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		r, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
		o.payloads = []int{len(r.GetPayload().GetBody())}
		return finish(&o, err, nil, nil)
	},
	"large messages": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		r, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 3 << 20, Payload: &testpb.Payload{Body: make([]byte, 3<<20)}}, grpc.MaxCallRecvMsgSize(8<<20), grpc.MaxCallSendMsgSize(8<<20))
		o.payloads = []int{len(r.GetPayload().GetBody())}
		return finish(&o, err, nil, nil)
	},
	"metadata echoed": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		var hdr, trl metadata.MD
		ctx = metadata.AppendToOutgoingContext(ctx, testsvc.EchoInitialKey, "hello", testsvc.EchoTrailingKey, string([]byte{0, 1, 254}))
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
		return finish(&o, err, hdr, trl)
	},
	"client stream": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		s, err := c.StreamingInputCall(ctx)
		if err != nil {
			return finish(&o, err, nil, nil)
		}
		for _, n := range []int{0, 1, 1000, 100000} {
			_ = s.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, n)}})
		}
		r, err := s.CloseAndRecv()
		o.payloads = []int{int(r.GetAggregatedPayloadSize())}
		return finish(&o, err, nil, nil)
	},
	"server stream": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		s, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 0}, {Size: 5}, {Size: 70000}}})
		if err == nil {
			o.payloads, err = recvAll(s.Recv)
		}
		return finish(&o, err, nil, nil)
	},
	"bidi": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		s, err := c.FullDuplexCall(ctx)
		if err != nil {
			return finish(&o, err, nil, nil)
		}
		for i := range 4 {
			_ = s.Send(&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: int32(i * 10)}}})
			m, err := s.Recv()
			if err != nil {
				return finish(&o, err, nil, nil)
			}
			o.payloads = append(o.payloads, len(m.GetPayload().GetBody()))
		}
		_ = s.CloseSend()
		_, err = s.Recv()
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return finish(&o, err, nil, nil)
	},
	"status after messages": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		s, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{
			ResponseParameters: []*testpb.ResponseParameters{{Size: 3}},
			ResponseStatus:     &testpb.EchoStatus{Code: int32(codes.DataLoss), Message: "verloren ✗"},
		})
		if err == nil {
			o.payloads, err = recvAll(s.Recv)
		}
		return finish(&o, err, nil, nil)
	},
	"deadline on a sleeping server": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		s, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1, IntervalUs: 5e6}}})
		if err == nil {
			o.payloads, err = recvAll(s.Recv)
		}
		o.msg = ""
		o2 := finish(&o, err, nil, nil)
		o2.msg = "" // gRPC's own wording of a local deadline differs by where it was noticed
		return o2
	},
	"cancel after begin": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		ctx, cancel := context.WithCancel(ctx)
		s, err := c.StreamingInputCall(ctx)
		if err != nil {
			cancel()
			return finish(&o, err, nil, nil)
		}
		cancel()
		_, err = s.CloseAndRecv()
		o2 := finish(&o, err, nil, nil)
		o2.msg = ""
		return o2
	},
	"cancel after first response": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s, err := c.FullDuplexCall(ctx)
		if err != nil {
			return finish(&o, err, nil, nil)
		}
		_ = s.Send(&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 9}}})
		m, err := s.Recv()
		if err != nil {
			return finish(&o, err, nil, nil)
		}
		o.payloads = []int{len(m.GetPayload().GetBody())}
		cancel()
		_, err = s.Recv()
		o2 := finish(&o, err, nil, nil)
		o2.msg = ""
		return o2
	},
	"unimplemented method": func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
		var o outcome
		_, err := c.UnimplementedCall(ctx, &testpb.Empty{})
		return finish(&o, err, nil, nil)
	},
}

func statusCases() map[string]func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
	out := map[string]func(ctx context.Context, c testgrpc.TestServiceClient) outcome{}
	for _, code := range []codes.Code{codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.Unavailable, codes.Internal} {
		msg := "Fehler " + code.String() + ": ünïcödé ✓ 漢字"
		out["status "+code.String()] = func(ctx context.Context, c testgrpc.TestServiceClient) outcome {
			var o outcome
			_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(code), Message: msg}})
			return finish(&o, err, nil, nil)
		}
	}
	return out
}

// directUpstream is a real gRPC server with the test service, and a connection to it.
func directUpstream(t *testing.T) (addr string, direct *grpc.ClientConn) {
	t.Helper()
	addr = upstream(t)
	direct, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	return addr, direct
}

// assertTransparent makes every transparency and status case directly and through e's kas (public and
// internal API, to agent 1), and reports every difference a caller could see.
func assertTransparent(t *testing.T, e *testenv.Env, direct grpc.ClientConnInterface) {
	t.Helper()
	cases := statusCases()
	for name, f := range transparencyCases {
		cases[name] = f
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			want := f(ctx, testgrpc.NewTestServiceClient(direct))
			for via, conn := range map[string]grpc.ClientConnInterface{"public": e.Public, "internal": e.Kas.InternalConn()} {
				got := f(testenv.AgentCtx(ctx, 1), testgrpc.NewTestServiceClient(conn))
				if got.String() != want.String() {
					t.Errorf("%s:\n through the tunnel: %v\n directly:           %v", via, got, want)
				}
			}
		})
	}
}

func TestExposedServiceIsTransparent(t *testing.T) {
	addr, direct := directUpstream(t)
	e := testenv.Start(t, testenv.Options{Agents: -1, Kas: func(c *kas.Config) { c.MaxMessageSize = 8 << 20 }})
	startAgentk(t, e, map[string]string{testService: addr})
	assertTransparent(t, e, direct)
}

// TestRegisteredServiceIsTransparent holds services registered on the agent itself to the same
// standard, both ways the agent can serve them.
func TestRegisteredServiceIsTransparent(t *testing.T) {
	_, direct := directUpstream(t)
	for mode, v := range map[string]struct{ bufconn, singleUse bool }{
		"from the tunnel":            {},
		"bufconn server":             {bufconn: true},
		"from single-use tunnels":    {singleUse: true},
		"bufconn server, single-use": {bufconn: true, singleUse: true},
	} {
		t.Run(mode, func(t *testing.T) {
			e := testenv.Start(t, testenv.Options{
				Kas: func(c *kas.Config) { c.MaxMessageSize = 8 << 20 },
				Agent: func(_ int64, c *tunclient.Config) {
					c.MaxMessageSize = 8 << 20
					c.BufconnServer = v.bufconn
					c.SingleUse = v.singleUse
				},
			})
			assertTransparent(t, e, direct)
		})
	}
}

// TestExposingTheDemoServiceReplacesTheBuiltInOne: the README's by-hand try exposes a demo-server; the
// agent then forwards the demo service to it instead of refusing the name as already registered.
func TestExposingTheDemoServiceReplacesTheBuiltInOne(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		served.Add(1)
		return h(ctx, req)
	}))
	demo.Register(s)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	e := testenv.Start(t, testenv.Options{Agents: -1})
	startAgentk(t, e, map[string]string{demo.Demo_ServiceDesc.ServiceName: l.Addr().String()})
	ctx, cancel := context.WithTimeout(testenv.AgentCtx(context.Background(), 1), 20*time.Second)
	defer cancel()
	resp, err := demo.NewDemoClient(e.Public).Echo(ctx, &demo.EchoRequest{Message: "via --expose"})
	if err != nil || resp.GetMessage() != "via --expose" {
		t.Fatalf("echo: %v %v", resp, err)
	}
	if served.Load() != 1 {
		t.Fatalf("the exposed upstream served %d calls, want 1", served.Load())
	}
}

func TestUnreachableUpstream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close() // nothing listens there any more
	e := testenv.Start(t, testenv.Options{Agents: -1})
	startAgentk(t, e, map[string]string{testService: dead})
	ctx, cancel := context.WithTimeout(testenv.AgentCtx(context.Background(), 1), 20*time.Second)
	defer cancel()
	_, err = testgrpc.NewTestServiceClient(e.Public).EmptyCall(ctx, &testpb.Empty{})
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), dead) {
		t.Fatalf("unreachable upstream: %v, want Unavailable naming %s", err, dead)
	}
	// The tunnel itself stays usable: the agent's own demo service answers.
	resp, err := demo.NewDemoClient(e.Public).Echo(ctx, &demo.EchoRequest{Message: "still here"})
	if err != nil || resp.GetMessage() != "still here" {
		t.Fatalf("tunnel unusable after an upstream failure: %v", err)
	}
}
