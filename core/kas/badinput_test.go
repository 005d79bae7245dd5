package kas_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// The bad-input catalogue: raw clients send kas, on each of its listeners, what a broken or hostile peer
// would. Every case must get a specific answer (a gRPC code and a message that names the problem, or an
// HTTP status and body), kas must keep serving the healthy agents, and nothing may stay behind: the
// registry returns to its idle state and the goroutine count to where it started.

// Bounds of the catalogue. No case asserts a speed: these only turn a hang into a failure.
const (
	// badBound bounds every wait of a case.
	badBound          = 10 * time.Second
	badFindTimeout    = time.Second
	badHeaderTimeout  = 300 * time.Millisecond
	badMaxHeaderBytes = 4 << 10
	badMaxBody        = 1 << 10
	badMaxWaiting     = 2
	// badGoroutineSlack is how many goroutines above the start a case may leave: connections to the HTTP
	// upstream and gRPC's housekeeping come and go.
	badGoroutineSlack = 5
	// badRawAgent is the agent a raw tunnel claims to be; agents 1 and 2 are real and healthy.
	badRawAgent = 5
	// badBigFrame is the frame size that callers and agents use to fill flow-control windows.
	badBigFrame = 256 << 10
)

const (
	badEmptyCall         = "/grpc.testing.TestService/EmptyCall"
	badInputCall         = "/grpc.testing.TestService/StreamingInputCall"
	badOutputCall        = "/grpc.testing.TestService/StreamingOutputCall"
	badUnimplementedCall = "/grpc.testing.UnimplementedService/UnimplementedCall"
)

// badAnswer is what kas said to a bad input: a gRPC status, an HTTP status with its body, or nothing but
// closing the connection.
type badAnswer struct {
	code   codes.Code
	http   int
	closed bool
	// msg is the gRPC status message or the HTTP body.
	msg string
}

func badStatusOf(err error) badAnswer {
	st := status.Convert(err)
	return badAnswer{code: st.Code(), msg: st.Message()}
}

// badCase is one bad input. Exactly one of code, http and closed is what kas must answer; says are the
// fragments the message must contain.
type badCase struct {
	name   string
	run    func(t *testing.T, f *badFixture) badAnswer
	code   codes.Code
	http   int
	closed bool
	says   []string
}

func TestBadInputCatalogue(t *testing.T) {
	testtier.Full(t, "runs some 80 cases one after another, waiting for kas to settle after each (about 20 s)")
	f := startBadFixture(t)
	var cases []badCase
	cases = append(cases, badAgentAPICases()...)
	cases = append(cases, badPublicAPICases()...)
	cases = append(cases, badPrivateAPICases()...)
	cases = append(cases, badHTTPCases()...)
	cases = append(cases, badHostileCases()...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.run(t, f)
			c.check(t, got)
		})
		// The case's connections are closed (its cleanups ran): kas still serves everyone else and holds
		// nothing more than before.
		f.healthy(t, c.name)
		f.noLeak(t, c.name)
	}
}

func (c badCase) check(t *testing.T, got badAnswer) {
	t.Helper()
	switch {
	case c.http != 0:
		if got.http != c.http {
			t.Errorf("HTTP status %d (%q), want %d", got.http, got.msg, c.http)
		}
	case c.closed:
		if !got.closed {
			t.Errorf("connection not closed: %+v", got)
		}
	default:
		if got.code != c.code {
			t.Errorf("code %v (%q), want %v", got.code, got.msg, c.code)
		}
	}
	for _, s := range c.says {
		if !strings.Contains(got.msg, s) {
			t.Errorf("message %q does not say %q", got.msg, s)
		}
	}
	t.Logf("answer: code %v, HTTP %d, closed %v: %q", got.code, got.http, got.closed, got.msg)
}

// badFixture is one kas with every listener on loopback TCP, two healthy agents (agent 1 also serves
// HTTP) and the state every case must leave behind.
type badFixture struct {
	e       *testenv.Env
	auth    *auth.PrivateAuth
	httpURL string
	// base is the registry with only the healthy agents' tunnels, all idle.
	base       registry.Stats
	goroutines int
}

func startBadFixture(t *testing.T) *badFixture {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return
		}
		_, _ = fmt.Fprintf(w, "ok %s %d\n", r.URL.Path, n)
	}))
	t.Cleanup(upstream.Close)
	upURL, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, auth.MinPrivateSecretLen)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	e := testenv.Start(t, testenv.Options{
		Agents: 2,
		Kas: func(c *kas.Config) {
			c.PrivateListen = "127.0.0.1:0"
			c.HTTPListen = "127.0.0.1:0"
			c.PrivateAPISecret = secret
			c.FindTimeout = badFindTimeout
			c.UnservedGrace = badFindTimeout / 4
			c.Limits = limits.Limits{
				MaxTunnelsPerAgent:     badMaxTunnels,
				MaxWaiting:             badMaxWaitingAll,
				TunnelHandshakeTimeout: badHandshake,
				MaxWaitingPerAgent:     badMaxWaiting,
				HTTPReadHeaderTimeout:  badHeaderTimeout,
				MaxHTTPHeaderBytes:     badMaxHeaderBytes,
				MaxHTTPBody:            badMaxBody,
			}
		},
		// Tunnels a pool opened for a burst close soon after: at rest every pool is back to its minimum.
		Agent: func(_ int64, c *tunclient.Config) { c.MaxIdleTime = 200 * time.Millisecond },
		Register: func(id int64, a *tunclient.Agent) {
			if id != 1 {
				return
			}
			up, err := httptunnel.Register(a, upURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(up.Close) // after the agent stopped
		},
	})
	auth, err := auth.NewPrivateAuth(secret)
	if err != nil {
		t.Fatal(err)
	}
	f := &badFixture{e: e, auth: auth, httpURL: "http://" + e.Kas.Addrs().HTTP.String()}
	// Measure at rest, after calls: every pool at its minimum, every connection made.
	f.healthy(t, "start")
	want := int64(2 * tunclient.DefaultMinIdle)
	badWaitFor(t, "the healthy agents' pools to settle", func() error {
		if st := e.Kas.Registry().Stats(); st != (registry.Stats{IdleTunnels: want, ConnectedAgents: 2}) {
			return fmt.Errorf("registry %+v, want %d idle tunnels of 2 agents", st, want)
		}
		return nil
	})
	f.base = e.Kas.Registry().Stats()
	time.Sleep(200 * time.Millisecond) // let the goroutines of the warm-up calls end
	f.goroutines = runtime.NumGoroutine()
	return f
}

// healthy makes a gRPC call to each healthy agent and an HTTP request to agent 1.
func (f *badFixture) healthy(t *testing.T, after string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), badBound)
	defer cancel()
	c := testgrpc.NewTestServiceClient(f.e.Public)
	for _, id := range []int64{1, 2} {
		resp, err := c.UnaryCall(testenv.AgentCtx(ctx, id), &testpb.SimpleRequest{ResponseSize: 10})
		if err != nil || len(resp.GetPayload().GetBody()) != 10 {
			t.Fatalf("after %s: call to healthy agent %d: %v", after, id, err)
		}
	}
	code, body := f.httpDo(t, ctx, http.MethodPost, "/agents/1/healthy", strings.NewReader("abc"))
	if code != http.StatusOK || body != "ok /healthy 3\n" {
		t.Fatalf("after %s: HTTP to healthy agent 1: %d %q", after, code, body)
	}
}

// noLeak waits until the registry is back to its idle state and the goroutines to their count at the
// start, within badBound.
func (f *badFixture) noLeak(t *testing.T, after string) {
	t.Helper()
	badWaitFor(t, "tunnels after "+after, func() error {
		if st := f.e.Kas.Registry().Stats(); st != f.base {
			return fmt.Errorf("registry %+v, want %+v", st, f.base)
		}
		return nil
	})
	badWaitFor(t, "goroutines after "+after, func() error {
		if n := runtime.NumGoroutine(); n > f.goroutines+badGoroutineSlack {
			return fmt.Errorf("%d goroutines, %d at the start", n, f.goroutines)
		}
		return nil
	})
}

// badWaitFor polls cond until it returns nil, failing the test with its last error after badBound.
func badWaitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(badBound)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// badCtx is a context that ends after badBound or with the test.
func badCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), badBound)
	t.Cleanup(cancel)
	return ctx
}

// badConn is a gRPC client connection that uses the raw codec and whose TCP connection the test can cut.
type badConn struct {
	*grpc.ClientConn
	mu  sync.Mutex
	tcp []net.Conn
}

func badDial(t *testing.T, addr net.Addr, opts ...grpc.DialOption) *badConn {
	t.Helper()
	rc := &badConn{}
	all := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
			if err == nil {
				rc.mu.Lock()
				rc.tcp = append(rc.tcp, c)
				rc.mu.Unlock()
			}
			return c, err
		}),
		grpc.WithDefaultCallOptions(grpctool.RawCallCodec(), grpc.MaxCallSendMsgSize(64<<20), grpc.MaxCallRecvMsgSize(64<<20)),
		grpc.WithDisableRetry(),
	}
	conn, err := grpc.NewClient("passthrough:///"+addr.String(), append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	rc.ClientConn = conn
	t.Cleanup(func() { _ = conn.Close() })
	return rc
}

// cut closes the TCP connections under the client, as a peer that vanishes mid-call would.
func (rc *badConn) cut() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, c := range rc.tcp {
		_ = c.Close()
	}
}

func badMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// badRawCall makes a call of method on conn with md, sending frames and half-closing, and returns the
// frames it got and the call's status (nil for OK).
func badRawCall(ctx context.Context, conn grpc.ClientConnInterface, method string, md metadata.MD, frames ...[]byte) ([][]byte, error) {
	s, err := conn.NewStream(metadata.NewOutgoingContext(ctx, md), grpctool.BidiStreamDesc, method)
	if err != nil {
		return nil, err
	}
	for _, fr := range frames {
		if s.SendMsg(&grpctool.RawFrame{Data: fr}) != nil {
			break // the call is over: its status comes from RecvMsg
		}
	}
	_ = s.CloseSend()
	var got [][]byte
	for {
		var fr grpctool.RawFrame
		if err := s.RecvMsg(&fr); err != nil {
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			return got, err
		}
		got = append(got, fr.Data)
	}
}

func badAgentMD(id string, more ...string) metadata.MD {
	return metadata.Pairs(append([]string{rpc.RoutingAgentIDMetadataKey, id}, more...)...)
}

// ---- agent API ----

func badBearer(id int64) string { return "Bearer " + testenv.Token(id) }

// tunnel opens a raw Connect stream on the agent API with authz as its authorization metadata (none
// when empty).
func (f *badFixture) tunnel(t *testing.T, authz string, opts ...grpc.DialOption) (rpc.ReverseTunnel_ConnectClient, *badConn) {
	t.Helper()
	rc := badDial(t, f.e.Kas.Addrs().Agent, opts...)
	// A tunnel outlives every wait of its case: a tunnel that kas fails to end must not end on its own
	// while the case waits for kas to do it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*badBound)
	t.Cleanup(cancel)
	if authz != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", authz)
	}
	s, err := rpc.NewReverseTunnelClient(rc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, rc
}

// badTunnelEnd reads a tunnel to its end and returns kas's status for it.
func badTunnelEnd(s rpc.ReverseTunnel_ConnectClient) error {
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// badAsAgent sends msgs on a new tunnel and returns how kas ended the tunnel.
func badAsAgent(authz string, msgs ...any) func(t *testing.T, f *badFixture) badAnswer {
	return func(t *testing.T, f *badFixture) badAnswer {
		s, _ := f.tunnel(t, authz)
		for _, m := range msgs {
			if s.SendMsg(m) != nil {
				break // kas ended the tunnel: its status comes from Recv
			}
		}
		return badStatusOf(badTunnelEnd(s))
	}
}

func badDescriptor(services ...*rpc.Service) *rpc.ConnectRequest {
	return &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Descriptor_{Descriptor_: &rpc.Descriptor{
		AgentDescriptor: &rpc.AgentDescriptor{Services: services},
	}}}
}

// badTestDescriptor serves the whole test service.
func badTestDescriptor() *rpc.ConnectRequest {
	return badDescriptor(&rpc.Service{Name: "grpc.testing.TestService", AllMethods: true})
}

var (
	badHeaderMsg  = &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Header{Header: &rpc.Header{}}}
	badTrailerMsg = &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Trailer{Trailer: &rpc.Trailer{}}}
)

// routed opens a tunnel for badRawAgent that serves the test service and routes a call of method with
// frames to it through the public API. It returns the tunnel once it received the call's request_info,
// its connection, and the call's status when the call ends.
func (f *badFixture) routed(t *testing.T, method string, frames ...[]byte) (rpc.ReverseTunnel_ConnectClient, *badConn, <-chan error) {
	t.Helper()
	return f.routedWith(t, badTestDescriptor(), method, frames...)
}

// routedWith is routed with the given descriptor (a reusable tunnel's, say).
func (f *badFixture) routedWith(t *testing.T, desc *rpc.ConnectRequest, method string, frames ...[]byte) (rpc.ReverseTunnel_ConnectClient, *badConn, <-chan error) {
	t.Helper()
	s, rc := f.tunnel(t, badBearer(badRawAgent))
	if err := s.Send(desc); err != nil {
		t.Fatal(err)
	}
	badWaitFor(t, "kas to take the raw tunnel", func() error {
		if st := f.e.Kas.Registry().Stats(); st.IdleTunnels != f.base.IdleTunnels+1 {
			return fmt.Errorf("registry %+v", st)
		}
		return nil
	})
	caller := badDial(t, f.e.Kas.Addrs().API)
	ctx := badCtx(t)
	done := make(chan error, 1)
	go func() {
		_, err := badRawCall(ctx, caller, method, badAgentMD(fmt.Sprint(badRawAgent)), frames...)
		done <- err
	}()
	m, err := s.Recv()
	if err != nil {
		t.Fatalf("raw tunnel: %v", err)
	}
	if got := m.GetRequestInfo().GetMethodName(); got != method {
		t.Fatalf("raw tunnel got %v, want request_info for %s", m, method)
	}
	return s, rc, done
}

// badWantStatus checks a status that is not the case's main answer.
func badWantStatus(t *testing.T, what string, err error, code codes.Code, says ...string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Errorf("%s: %v, want %v", what, err, code)
	}
	for _, s := range says {
		if !strings.Contains(st.Message(), s) {
			t.Errorf("%s: %q does not say %q", what, st.Message(), s)
		}
	}
}

func badWait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(badBound):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func badAgentAPICases() []badCase {
	manyServices := make([]*rpc.Service, descriptor.MaxServices+1)
	for i := range manyServices {
		manyServices[i] = &rpc.Service{Name: fmt.Sprintf("s%d", i), AllMethods: true}
	}
	manyMethods := &rpc.Service{Name: "s"}
	for i := range descriptor.MaxMethods + 1 {
		manyMethods.Methods = append(manyMethods.Methods, &rpc.Method{Name: fmt.Sprintf("m%d", i)})
	}
	hugeName := &rpc.Service{Name: "s", Methods: []*rpc.Method{{Name: strings.Repeat("m", descriptor.DefaultMaxBytes)}}}
	message := &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Message{Message: &rpc.Message{Data: []byte("x")}}}
	return []badCase{
		{
			name: "agent/message before descriptor",
			run:  badAsAgent(badBearer(badRawAgent), message),
			code: codes.InvalidArgument, says: []string{"agent->kas tunnel", "message is not allowed after start"},
		},
		{
			name: "agent/two descriptors",
			run:  badAsAgent(badBearer(badRawAgent), badTestDescriptor(), badTestDescriptor()),
			code: codes.InvalidArgument, says: []string{"descriptor is not allowed after descriptor"},
		},
		{
			name: "agent/empty oneof first",
			run:  badAsAgent(badBearer(badRawAgent), &rpc.ConnectRequest{}),
			code: codes.InvalidArgument, says: []string{"empty message is not allowed after start"},
		},
		{
			name: "agent/empty oneof after descriptor",
			run:  badAsAgent(badBearer(badRawAgent), badTestDescriptor(), &rpc.ConnectRequest{}),
			code: codes.InvalidArgument, says: []string{"empty message is not allowed after descriptor"},
		},
		{
			name: "agent/not a ConnectRequest",
			run:  badAsAgent(badBearer(badRawAgent), &grpctool.RawFrame{Data: []byte{0xff, 0xff, 0xff}}),
			code: codes.InvalidArgument, says: []string{"first message is not a ConnectRequest"},
		},
		{
			name: "agent/oversized frame",
			run:  badAsAgent(badBearer(badRawAgent), &grpctool.RawFrame{Data: make([]byte, kas.DefaultMaxMessageSize+128<<10)}),
			code: codes.ResourceExhausted, says: []string{"larger than max"},
		},
		{
			name: "agent/descriptor over the byte bound",
			run:  badAsAgent(badBearer(badRawAgent), badDescriptor(hugeName)),
			code: codes.ResourceExhausted, says: []string{"descriptor is", fmt.Sprintf("the limit (--max-descriptor-bytes) is %d", descriptor.DefaultMaxBytes)},
		},
		{
			name: "agent/too many services",
			run:  badAsAgent(badBearer(badRawAgent), badDescriptor(manyServices...)),
			code: codes.InvalidArgument, says: []string{fmt.Sprintf("descriptor lists %d services, the limit is %d", descriptor.MaxServices+1, descriptor.MaxServices)},
		},
		{
			name: "agent/too many methods",
			run:  badAsAgent(badBearer(badRawAgent), badDescriptor(manyMethods)),
			code: codes.InvalidArgument, says: []string{fmt.Sprintf("more than %d methods", descriptor.MaxMethods)},
		},
		{
			name: "agent/service without a name",
			run:  badAsAgent(badBearer(badRawAgent), badDescriptor(&rpc.Service{AllMethods: true})),
			code: codes.InvalidArgument, says: []string{"service without a name"},
		},
		{
			name: "agent/invalid token",
			run:  badAsAgent("Bearer not-a-token", badTestDescriptor()),
			code: codes.Unauthenticated, says: []string{"invalid agent token"},
		},
		{
			name: "agent/no token",
			run:  badAsAgent("", badTestDescriptor()),
			code: codes.Unauthenticated, says: []string{"missing authorization metadata"},
		},
		{
			name: "agent/not a bearer token",
			run:  badAsAgent("Basic "+testenv.Token(badRawAgent), badTestDescriptor()),
			code: codes.Unauthenticated, says: []string{`not of the form "Bearer <token>"`},
		},
		{
			name: "agent/trailer before header",
			run: func(t *testing.T, f *badFixture) badAnswer {
				s, _, call := f.routed(t, badEmptyCall, nil)
				if err := s.Send(badTrailerMsg); err != nil {
					t.Fatal(err)
				}
				end := badTunnelEnd(s)
				badWantStatus(t, "caller", badWait(t, call, "the caller"), codes.Unavailable,
					fmt.Sprintf("agent %d broke the tunnel protocol", badRawAgent), "trailer is not allowed after descriptor")
				return badStatusOf(end)
			},
			code: codes.InvalidArgument, says: []string{"agent->kas tunnel: trailer is not allowed after descriptor"},
		},
		{
			name: "agent/header twice",
			run: func(t *testing.T, f *badFixture) badAnswer {
				s, _, call := f.routed(t, badEmptyCall, nil)
				for range 2 {
					if err := s.Send(badHeaderMsg); err != nil {
						break
					}
				}
				end := badTunnelEnd(s)
				badWantStatus(t, "caller", badWait(t, call, "the caller"), codes.Unavailable,
					fmt.Sprintf("agent %d broke the tunnel protocol", badRawAgent), "header is not allowed after header")
				return badStatusOf(end)
			},
			code: codes.InvalidArgument, says: []string{"agent->kas tunnel: header is not allowed after header"},
		},
		{
			name: "agent/response message over the max message size",
			run: func(t *testing.T, f *badFixture) badAnswer {
				s, _, call := f.routed(t, badEmptyCall, nil)
				big := &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Message{Message: &rpc.Message{Data: make([]byte, kas.DefaultMaxMessageSize+1)}}}
				for _, m := range []*rpc.ConnectRequest{badHeaderMsg, big} {
					if err := s.Send(m); err != nil {
						break
					}
				}
				// Both learn which limit it was.
				end := badTunnelEnd(s)
				badWantStatus(t, "agent", end, codes.ResourceExhausted, "response message is", "--max-message-size")
				return badStatusOf(badWait(t, call, "the caller"))
			},
			code: codes.ResourceExhausted, says: []string{"response message is", "--max-message-size"},
		},
		{
			name: "agent/stops reading",
			run: func(t *testing.T, f *badFixture) badAnswer {
				// The tunnel takes the call and then reads nothing: with small fixed windows, kas's sends to it
				// soon block on flow control.
				s, _ := f.tunnel(t, badBearer(badRawAgent), grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
				if err := s.Send(badTestDescriptor()); err != nil {
					t.Fatal(err)
				}
				badWaitFor(t, "kas to take the raw tunnel", func() error {
					if st := f.e.Kas.Registry().Stats(); st.IdleTunnels != f.base.IdleTunnels+1 {
						return fmt.Errorf("registry %+v", st)
					}
					return nil
				})
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				caller := badDial(t, f.e.Kas.Addrs().API)
				call := make(chan error, 1)
				go func() {
					frames := make([][]byte, 64) // 16 MiB: far more than every window on the way
					for i := range frames {
						frames[i] = make([]byte, badBigFrame)
					}
					_, err := badRawCall(ctx, caller, badInputCall, badAgentMD(fmt.Sprint(badRawAgent)), frames...)
					call <- err
				}()
				f.healthy(t, "an agent stopped reading") // everyone else is served meanwhile
				err := badWait(t, call, "the caller")
				// The caller gave up: kas ends the tunnel and releases the call although the agent still
				// reads nothing.
				badWaitFor(t, "kas to release the stuck tunnel", func() error {
					if st := f.e.Kas.Registry().Stats(); st != f.base {
						return fmt.Errorf("registry %+v, want %+v", st, f.base)
					}
					return nil
				})
				badWantStatus(t, "agent", badTunnelEnd(s), codes.Canceled, "the caller cancelled the call")
				return badStatusOf(err)
			},
			code: codes.DeadlineExceeded,
		},
		{
			name: "agent/disconnects mid-call",
			run: func(t *testing.T, f *badFixture) badAnswer {
				_, rc, call := f.routed(t, badEmptyCall, nil)
				rc.cut()
				return badStatusOf(badWait(t, call, "the caller"))
			},
			code: codes.Unavailable, says: []string{fmt.Sprintf("tunnel to agent %d broke", badRawAgent)},
		},
	}
}

// ---- public API ----

// badPublicCall makes a raw call on the public API.
func badPublicCall(method string, md metadata.MD, frames ...[]byte) func(t *testing.T, f *badFixture) badAnswer {
	return func(t *testing.T, f *badFixture) badAnswer {
		_, err := badRawCall(badCtx(t), badDial(t, f.e.Kas.Addrs().API), method, md, frames...)
		return badStatusOf(err)
	}
}

// badLastSeen waits for the healthy agent's service to finish a call of method after the first n it saw.
func badLastSeen(t *testing.T, f *badFixture, n int, method string) error {
	t.Helper()
	var err error
	badWaitFor(t, "the service to end "+method, func() error {
		for _, s := range f.e.Agents[1].Service.Seen()[n:] {
			if s.Method == method {
				err = s.Err
				return nil
			}
		}
		return errors.New("not yet")
	})
	return err
}

func badPublicAPICases() []badCase {
	outputReq := func(t *testing.T, params ...*testpb.ResponseParameters) []byte {
		return badMarshal(t, &testpb.StreamingOutputCallRequest{ResponseParameters: params})
	}
	return []badCase{
		{
			name: "public/no agent id",
			run:  badPublicCall(badEmptyCall, metadata.Pairs("x-other", "1"), nil),
			code: codes.InvalidArgument, says: []string{"missing " + rpc.RoutingAgentIDMetadataKey},
		},
		{
			name: "public/agent id not a number",
			run:  badPublicCall(badEmptyCall, badAgentMD("one"), nil),
			code: codes.InvalidArgument, says: []string{rpc.RoutingAgentIDMetadataKey, `"one" is not a decimal int64`},
		},
		{
			name: "public/agent id twice",
			run:  badPublicCall(badEmptyCall, badAgentMD("1", rpc.RoutingAgentIDMetadataKey, "2"), nil),
			code: codes.InvalidArgument, says: []string{rpc.RoutingAgentIDMetadataKey, "must be present once, got 2 values"},
		},
		{
			name: "public/method name with two slashes",
			run:  badPublicCall("/grpc.testing.TestService/Empty/Call", badAgentMD("1"), nil),
			code: codes.InvalidArgument, says: []string{"bad method", "/grpc.testing.TestService/Empty/Call"},
		},
		{
			// The agent may start serving the method soon (a new version connects): the call waits the
			// unserved grace for a suitable tunnel, then fails saying why.
			name: "public/method the agent does not serve",
			run:  badPublicCall(badUnimplementedCall, badAgentMD("1"), nil),
			code: codes.Unimplemented, says: []string{"agent 1 is connected but does not serve " + badUnimplementedCall, "--unserved-grace"},
		},
		{
			name: "public/message over the max message size",
			run:  badPublicCall(badEmptyCall, badAgentMD("1"), make([]byte, kas.DefaultMaxMessageSize+1)),
			code: codes.ResourceExhausted, says: []string{"received message larger than max"},
		},
		{
			name: "public/too many calls waiting for one agent",
			run: func(t *testing.T, f *badFixture) badAnswer {
				conn := badDial(t, f.e.Kas.Addrs().API)
				ctx := badCtx(t)
				waiting := make(chan error, badMaxWaiting)
				for range badMaxWaiting {
					go func() {
						_, err := badRawCall(ctx, conn, badEmptyCall, badAgentMD("99"), nil)
						waiting <- err
					}()
				}
				badWaitFor(t, "the calls to wait", func() error {
					if st := f.e.Kas.Registry().Stats(); st.WaitingCalls != badMaxWaiting {
						return fmt.Errorf("registry %+v", st)
					}
					return nil
				})
				_, err := badRawCall(ctx, conn, badEmptyCall, badAgentMD("99"), nil)
				for range badMaxWaiting {
					badWantStatus(t, "waiting call", badWait(t, waiting, "a waiting call"), codes.DeadlineExceeded, "no tunnel to agent 99")
				}
				return badStatusOf(err)
			},
			code: codes.ResourceExhausted, says: []string{"agent 99", "--max-waiting-calls-per-agent"},
		},
		{
			name: "public/caller disconnects mid-call",
			run: func(t *testing.T, f *badFixture) badAnswer {
				n := len(f.e.Agents[1].Service.Seen())
				rc := badDial(t, f.e.Kas.Addrs().API)
				s, err := rc.NewStream(metadata.NewOutgoingContext(badCtx(t), badAgentMD("1")), grpctool.BidiStreamDesc, badOutputCall)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.SendMsg(&grpctool.RawFrame{Data: outputReq(t, &testpb.ResponseParameters{Size: 1}, &testpb.ResponseParameters{Size: 1, IntervalUs: 60e6})}); err != nil {
					t.Fatal(err)
				}
				_ = s.CloseSend() // a server-streaming service starts once the request is complete
				if err := s.RecvMsg(&grpctool.RawFrame{}); err != nil {
					t.Fatal(err)
				}
				rc.cut() // the call is under way on the agent: the caller vanishes
				// What the agent's service saw: its call was cancelled.
				return badStatusOf(status.FromContextError(badLastSeen(t, f, n, "StreamingOutputCall")).Err())
			},
			code: codes.Canceled,
		},
		{
			name: "public/caller stops reading",
			run: func(t *testing.T, f *badFixture) badAnswer {
				n := len(f.e.Agents[1].Service.Seen())
				// Small fixed windows: the caller's window fills after a few frames.
				rc := badDial(t, f.e.Kas.Addrs().API, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
				ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
				defer cancel()
				params := make([]*testpb.ResponseParameters, 64) // 16 MiB: far more than every window on the way
				for i := range params {
					params[i] = &testpb.ResponseParameters{Size: badBigFrame}
				}
				s, err := rc.NewStream(metadata.NewOutgoingContext(ctx, badAgentMD("1")), grpctool.BidiStreamDesc, badOutputCall)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.SendMsg(&grpctool.RawFrame{Data: outputReq(t, params...)}); err != nil {
					t.Fatal(err)
				}
				_ = s.CloseSend()
				f.healthy(t, "a caller stopped reading") // everyone else is served meanwhile
				badWait(t, ctx.Done(), "the caller's deadline")
				for {
					if err = s.RecvMsg(&grpctool.RawFrame{}); err != nil {
						break
					}
				}
				// The service was stuck sending and ended with the call.
				if serr := badLastSeen(t, f, n, "StreamingOutputCall"); serr == nil {
					t.Errorf("the service sent all 16 MiB to a caller that read nothing")
				}
				return badStatusOf(err)
			},
			code: codes.DeadlineExceeded,
		},
	}
}

// ---- private API ----

// badPrivateCall makes a raw call of EmptyCall on the private API with creds (dial options) and md.
// ready: the gateway must have found agent 1's tunnel (tunnel_ready) before it answers.
func badPrivateCall(creds func(f *badFixture) []grpc.DialOption, ready bool, md metadata.MD, frames ...[]byte) func(t *testing.T, f *badFixture) badAnswer {
	return func(t *testing.T, f *badFixture) badAnswer {
		var opts []grpc.DialOption
		if creds != nil {
			opts = creds(f)
		}
		got, err := badRawCall(badCtx(t), badDial(t, f.e.Kas.Addrs().Private, opts...), badEmptyCall, md, frames...)
		if ready {
			var first rpc.GatewayResponse
			if len(got) != 1 || proto.Unmarshal(got[0], &first) != nil || rpc.GatewayState(&first) != rpc.StateTunnelReady {
				t.Errorf("gateway sent %d messages before its error, want tunnel_ready", len(got))
			}
		}
		return badStatusOf(err)
	}
}

func badValidJWT(f *badFixture) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithPerRPCCredentials(f.auth.Credentials())}
}

func badForgedJWT(*badFixture) []grpc.DialOption {
	other, err := auth.NewPrivateAuth([]byte(strings.Repeat("not the secret ", 3)))
	if err != nil {
		panic(err)
	}
	return []grpc.DialOption{grpc.WithPerRPCCredentials(other.Credentials())}
}

func badPrivateAPICases() []badCase {
	start := func() []byte { b, _ := proto.Marshal(&rpc.StartStreaming{}); return b }()
	return []badCase{
		{
			name: "private/no JWT",
			run:  badPrivateCall(nil, false, badAgentMD("1"), start, nil),
			code: codes.Unauthenticated, says: []string{"missing authorization metadata"},
		},
		{
			name: "private/forged JWT",
			run:  badPrivateCall(badForgedJWT, false, badAgentMD("1"), start, nil),
			code: codes.Unauthenticated, says: []string{"private API: invalid token"},
		},
		{
			name: "private/agent token instead of a JWT",
			run: badPrivateCall(func(*badFixture) []grpc.DialOption {
				return []grpc.DialOption{grpc.WithPerRPCCredentials(tunclient.TokenCredentials{Token: testenv.Token(1), AllowInsecure: true})}
			}, false, badAgentMD("1"), start, nil),
			code: codes.Unauthenticated, says: []string{"private API: invalid token"},
		},
		{
			name: "private/valid JWT, no agent id",
			run:  badPrivateCall(badValidJWT, false, metadata.Pairs("x-other", "1"), start, nil),
			code: codes.InvalidArgument, says: []string{"missing " + rpc.RoutingAgentIDMetadataKey},
		},
		{
			name: "private/valid JWT, agent id not a number",
			run:  badPrivateCall(badValidJWT, false, badAgentMD("0x1"), start, nil),
			code: codes.InvalidArgument, says: []string{`"0x1" is not a decimal int64`},
		},
		{
			name: "private/valid JWT, agent id twice",
			run:  badPrivateCall(badValidJWT, false, badAgentMD("1", rpc.RoutingAgentIDMetadataKey, "1"), start, nil),
			code: codes.InvalidArgument, says: []string{"must be present once"},
		},
		{
			name: "private/valid JWT, first message not start_streaming",
			run:  badPrivateCall(badValidJWT, true, badAgentMD("1"), []byte{0xff, 0xff, 0xff}),
			code: codes.InvalidArgument, says: []string{"routing->gateway kas", "start_streaming"},
		},
		{
			name: "private/valid JWT, half-close before start_streaming",
			run:  badPrivateCall(badValidJWT, true, badAgentMD("1")),
			code: codes.InvalidArgument, says: []string{"routing->gateway kas", "EOF is not allowed after start"},
		},
	}
}

// ---- HTTP listener ----

// httpDo sends one request to kas's HTTP listener on a connection of its own and returns the status
// and the body.
func (f *badFixture) httpDo(t *testing.T, ctx context.Context, method, path string, body io.Reader, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, f.httpURL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, string(b)
}

func badHTTPCall(method, path string, body func() io.Reader, header ...string) func(t *testing.T, f *badFixture) badAnswer {
	return func(t *testing.T, f *badFixture) badAnswer {
		var b io.Reader
		if body != nil {
			b = body()
		}
		code, msg := f.httpDo(t, badCtx(t), method, path, b, header...)
		return badAnswer{http: code, msg: msg}
	}
}

// badUnsized hides a body's length, so that it goes chunked.
type badUnsized struct{ r io.Reader }

func (u badUnsized) Read(p []byte) (int, error) { return u.r.Read(p) }

// badSlowloris sends a request header a line at a time and never finishes it; it reports whether kas
// closed the connection within badBound.
func badSlowloris(t *testing.T, f *badFixture) badAnswer {
	c, err := net.Dial("tcp", f.e.Kas.Addrs().HTTP.String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	start := time.Now()
	defer func() { t.Logf("slowloris: connection open for %v", time.Since(start).Round(10*time.Millisecond)) }()
	deadline := start.Add(badBound)
	var got []byte
	buf := make([]byte, 512)
	for line := "GET /agents/1/slow HTTP/1.1\r\nHost: kas\r\n"; time.Now().Before(deadline); line = "X-Slow: 1\r\n" {
		if _, err := c.Write([]byte(line)); err != nil {
			return badAnswer{closed: true, msg: string(got)} // the server closed the connection
		}
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			return badAnswer{closed: true, msg: string(got)}
		}
	}
	return badAnswer{msg: "still open after " + badBound.String()}
}

func badHTTPCases() []badCase {
	cases := []badCase{
		{
			name:   "http/slowloris",
			run:    badSlowloris,
			closed: true,
		},
		{
			name: "http/header too large",
			run:  badHTTPCall(http.MethodGet, "/agents/1/x", nil, "X-Big", strings.Repeat("a", badMaxHeaderBytes+100)),
			http: http.StatusRequestHeaderFieldsTooLarge, says: []string{"request header too large", "--max-http-header-bytes", "4096 bytes"},
		},
		{
			name: "http/header far too large",
			run:  badHTTPCall(http.MethodGet, "/agents/1/x", nil, "X-Big", strings.Repeat("a", 64<<10)),
			http: http.StatusRequestHeaderFieldsTooLarge, says: []string{"Request Header Fields Too Large"},
		},
		{
			name: "http/body too large",
			run: badHTTPCall(http.MethodPost, "/agents/1/x", func() io.Reader {
				return strings.NewReader(strings.Repeat("b", 2*badMaxBody))
			}),
			http: http.StatusRequestEntityTooLarge, says: []string{"request body too large", "--max-http-body", "1024 bytes"},
		},
		{
			name: "http/chunked body too large",
			run: badHTTPCall(http.MethodPost, "/agents/1/x", func() io.Reader {
				return badUnsized{strings.NewReader(strings.Repeat("b", 2*badMaxBody))}
			}),
			http: http.StatusRequestEntityTooLarge, says: []string{"request body too large", "1024 bytes"},
		},
		{
			name: "http/agent id not a number",
			run:  badHTTPCall(http.MethodGet, "/agents/notanumber/x", nil),
			http: http.StatusBadRequest, says: []string{`agent id "notanumber" is not a decimal int64`},
		},
		{
			name: "http/outside the agents path",
			run:  badHTTPCall(http.MethodGet, "/elsewhere", nil),
			http: http.StatusNotFound, says: []string{"/agents/{agentID}/{path}"},
		},
		{
			name: "http/unknown agent",
			run:  badHTTPCall(http.MethodGet, "/agents/99/x", nil),
			http: http.StatusGatewayTimeout, says: []string{"no tunnel to agent 99"},
		},
	}
	// Paths that could lead out of the agent's upstream base path, sent as curl --path-as-is does. kas
	// refuses them with 400 before calling the agent (the agent's own refusal would be a 502).
	for _, p := range []struct{ path, says string }{
		{"../secret", `path segment ".." is a dot segment`},
		{"%2e%2e/secret", `path segment "%2e%2e" is a dot segment`},
		{"%2E%2E/secret", `path segment "%2E%2E" is a dot segment`},
		{".%2e/secret", `path segment ".%2e" is a dot segment`},
		{"%2e./", `path segment "%2e." is a dot segment`},
		{"a/../../secret", `path segment ".." is a dot segment`},
		{"./x", `path segment "." is a dot segment`},
		{"%2e/x", `path segment "%2e" is a dot segment`},
		{"a/..", `path segment ".." is a dot segment`},
		{"..", `path segment ".." is a dot segment`},
		{"..;/secret", `path segment "..;" is a dot segment`},
		{"..%2fsecret", `path segment "..%2fsecret" has an encoded slash`},
		{"..%2Fsecret", `path segment "..%2Fsecret" has an encoded slash`},
		{"%2e%2e%2fsecret", `path segment "%2e%2e%2fsecret" has an encoded slash`},
		{"a%2fb", `path segment "a%2fb" has an encoded slash`},
		{`..\secret`, `path segment "..%5Csecret" has a backslash`}, // Go's server escapes the raw backslash
		{"..%5csecret", `path segment "..%5csecret" has a backslash`},
		{"a%00b", `path segment "a%00b" has a NUL`},
	} {
		cases = append(cases, badCase{
			name: "http/path " + p.path,
			run:  badHTTPRawPath("/agents/1/" + p.path),
			http: http.StatusBadRequest, says: []string{"bad request: " + p.says},
		})
	}
	return cases
}

// badHTTPRawPath sends GET path on a connection of its own, exactly as written: Go's client would
// escape a raw backslash.
func badHTTPRawPath(path string) func(t *testing.T, f *badFixture) badAnswer {
	return func(t *testing.T, f *badFixture) badAnswer {
		c, err := net.Dial("tcp", f.e.Kas.Addrs().HTTP.String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(badBound))
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: kas\r\nConnection: close\r\n\r\n", path); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: read body: %v", path, err)
		}
		return badAnswer{http: resp.StatusCode, msg: string(b)}
	}
}
