package kas_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// rejections is how often kas refused something because limit bit.
func rejections(t *testing.T, e *testenv.Env, limit string) float64 {
	return testenv.Value(testenv.Scrape(t, e.Metrics)["tunnel_limit_rejections_total"], "limit", limit)
}

func TestLimitMessageSize(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Transport: testenv.TCP, Kas: func(c *kas.Config) { c.MaxMessageSize = 1 << 10 }})
	c := testgrpc.NewTestServiceClient(e.Public)
	if got := rejections(t, e, "message_size"); got != 0 {
		t.Fatalf("message_size rejections %v before any, want a zero series", got)
	}
	_, err := c.UnaryCall(testenv.AgentCtx(testCtx(t), 1), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: make([]byte, 2<<10)}})
	// gRPC answers an oversized request itself, before kas sees it; its message gives the limit.
	wantStatus(t, "request above the limit", err, codes.ResourceExhausted, "larger than max (2054 vs. 1024)")
	_, err = c.UnaryCall(testenv.AgentCtx(testCtx(t), 1), &testpb.SimpleRequest{ResponseSize: 2 << 10})
	wantStatus(t, "response above the limit", err, codes.ResourceExhausted, "larger than the limit (--max-message-size) of 1024 bytes")
	testenv.Eventually(t, 5*time.Second, func() bool { return rejections(t, e, "message_size") == 2 }, "message_size rejections %v, want 2", rejections(t, e, "message_size"))
	// Smaller calls still go through.
	if _, err := c.UnaryCall(testenv.AgentCtx(testCtx(t), 1), &testpb.SimpleRequest{ResponseSize: 100}); err != nil {
		t.Fatal(err)
	}
}

func TestLimitWaitingCallsPerAgent(t *testing.T) {
	// Agent 1 serves; agent 7 has no tunnels, so calls to it wait.
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) { c.Limits.MaxWaitingPerAgent = 2 }})
	c := testgrpc.NewTestServiceClient(e.Public)
	ctx, cancel := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.EmptyCall(testenv.AgentCtx(ctx, 7), &testpb.Empty{})
		}()
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return e.Kas.Registry().Stats().WaitingCalls == 2 }, "the calls are not waiting")
	start := time.Now()
	_, err := c.EmptyCall(testenv.AgentCtx(testCtx(t), 7), &testpb.Empty{})
	wantStatus(t, "a third waiting call", err, codes.ResourceExhausted, "the limit (--max-waiting-calls-per-agent) is 2")
	if waited := time.Since(start); waited > 4*time.Second {
		t.Errorf("the refused call took %s: it waited instead of failing at once", waited)
	}
	// Other agents are not affected.
	if _, err := c.EmptyCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()
	testenv.Eventually(t, 10*time.Second, func() bool { return e.Kas.Registry().Stats().WaitingCalls == 0 }, "calls still wait")
	if got := rejections(t, e, "waiting_calls_per_agent"); got != 1 {
		t.Errorf("waiting_calls_per_agent rejections %v, want 1", got)
	}
}

func TestLimitTunnelsPerAgent(t *testing.T) {
	e := testenv.Start(t, testenv.Options{
		Kas:   func(c *kas.Config) { c.Limits.MaxTunnelsPerAgent = 2 },
		Agent: func(_ int64, c *tunclient.Config) { c.MinIdle = 4; c.MaxConnections = 8 },
	})
	testenv.Eventually(t, 10*time.Second, func() bool { return rejections(t, e, "tunnels_per_agent") > 0 }, "the agent never went over the limit")
	st := e.Kas.Registry().Stats()
	if st.IdleTunnels+st.BusyTunnels > 2 {
		t.Fatalf("kas holds %d tunnels of one agent, the limit is 2", st.IdleTunnels+st.BusyTunnels)
	}
	if _, err := testgrpc.NewTestServiceClient(e.Public).EmptyCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{}); err != nil {
		t.Fatalf("a call within the limit: %v", err)
	}
}

func TestLimitTunnelRate(t *testing.T) {
	e := testenv.Start(t, testenv.Options{
		Kas: func(c *kas.Config) { c.Limits.TunnelRate, c.Limits.TunnelBurst = 2, 2 },
		// A single-use agent opens a tunnel per call; a reusing one would not go over the rate.
		Agent: func(_ int64, c *tunclient.Config) { c.MinIdle, c.SingleUse = 1, true },
	})
	// Every call takes a tunnel and the agent opens another: a few calls in a row go over 2 per second.
	c := testgrpc.NewTestServiceClient(e.Public)
	for i := 0; rejections(t, e, "tunnel_rate") == 0; i++ {
		if i == 20 {
			t.Fatal("20 calls in a row never went over 2 new tunnels a second")
		}
		if _, err := c.EmptyCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// The agent backs off and comes back: calls still succeed, at the pace the limit allows.
	if _, err := c.EmptyCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
}

func TestLimitsDefaultAndValidate(t *testing.T) {
	if _, err := kas.New(kas.Config{Authenticator: nil}); err == nil || !strings.Contains(err.Error(), "kas config") {
		t.Fatalf("an empty config: %v", err)
	}
	_, err := kas.New(kas.Config{Authenticator: testAuth(t), AgentListen: "127.0.0.1:0", APIListen: "127.0.0.1:0", Limits: limits.Limits{MaxWaitingPerAgent: -1}, Dev: true})
	if err == nil || !strings.Contains(err.Error(), "limits must not be negative") {
		t.Fatalf("a negative limit: %v", err)
	}
	_, err = kas.New(kas.Config{Authenticator: testAuth(t), AgentListen: "127.0.0.1:0", APIListen: "0.0.0.0:0", Dev: true})
	if err == nil || !strings.Contains(err.Error(), "loopback only") {
		t.Fatalf("dev mode on every interface: %v", err)
	}
	_, err = kas.New(kas.Config{Authenticator: testAuth(t), AgentListen: "127.0.0.1:0", APIListen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "need caller tokens") {
		t.Fatalf("no caller tokens: %v", err)
	}
}

func testAuth(t *testing.T) *auth.StaticTokens {
	a, err := auth.NewStaticTokens(map[string]int64{"token": 1})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestLimitDescriptorSize(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Transport: testenv.TCP, Kas: func(c *kas.Config) { c.Limits.MaxDescriptorBytes = 4000 }})
	conn, err := tunclient.DialKas(e.Kas.Addrs().Agent.String(), testenv.Token(3))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := rpc.NewReverseTunnelClient(conn).Connect(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	big := &rpc.AgentDescriptor{Services: []*rpc.Service{{Name: strings.Repeat("s", 5000), AllMethods: true}}}
	if err := stream.Send(&rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Descriptor_{Descriptor_: &rpc.Descriptor{AgentDescriptor: big}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantStatus(t, "a descriptor over the limit", err, codes.ResourceExhausted, "the limit (--max-descriptor-bytes) is 4000")
	if got := rejections(t, e, "descriptor_size"); got != 1 {
		t.Errorf("descriptor_size rejections %v, want 1", got)
	}
	// Agents whose descriptors fit are served.
	if _, err := testgrpc.NewTestServiceClient(e.Public).EmptyCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
}
