package kas_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// A find timeout far longer than the tests' own contexts: a call that waits for it fails the test with
// the context's error instead of the code the test wants. Nothing here times how fast kas answers.
const (
	longFind  = 30 * time.Second
	testBound = 10 * time.Second
)

func longFindTimeout(c *kas.Config) { c.FindTimeout = longFind }

func boundedCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testBound)
	t.Cleanup(cancel)
	return ctx
}

// wantUnserved checks a call's status: Unimplemented from kas, naming the agent and the method.
func wantUnserved(t *testing.T, name string, err error, method string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "agent 1 is connected") || !strings.Contains(st.Message(), method) {
		t.Fatalf("%s: %v, want Unimplemented: agent 1 is connected but does not serve %s", name, err, method)
	}
}

func TestUnservedMethodOnConnectedAgentFailsUnimplemented(t *testing.T) {
	testtier.Full(t, "waits out the unserved grace (2 s)")
	e := testenv.Start(t, testenv.Options{Kas: longFindTimeout})
	for name, conn := range map[string]interface {
		testgrpc.UnimplementedServiceClient
	}{
		"public API": testgrpc.NewUnimplementedServiceClient(e.Public),
		"in process": testgrpc.NewUnimplementedServiceClient(e.Kas.InternalConn()),
	} {
		_, err := conn.UnimplementedCall(testenv.AgentCtx(boundedCtx(t), 1), &testpb.Empty{})
		wantUnserved(t, name, err, "/grpc.testing.UnimplementedService/UnimplementedCall")
	}
	testenv.Eventually(t, testBound, func() bool { return e.Kas.Registry().Stats().WaitingCalls == 0 }, "calls still waiting")
	if v := testenv.Value(testenv.Scrape(t, e.Metrics)["tunnel_routing_timeout_total"]); v > 0 {
		t.Fatalf("%v find timeouts counted for calls that failed Unimplemented", v)
	}
}

func TestHTTPToAgentWithoutUpstreamIs502(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) {
		longFindTimeout(c)
		c.HTTPListen = "127.0.0.1:0"
	}})
	req, err := http.NewRequestWithContext(boundedCtx(t), http.MethodGet, "http://"+e.Kas.Addrs().HTTP.String()+"/agents/1/index.html", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET through an agent without --http-upstream: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "agent 1 does not serve HTTP") ||
		!strings.Contains(string(body), "--http-upstream") {
		t.Fatalf("%d %q, want 502 saying the agent serves no HTTP", resp.StatusCode, body)
	}
}

func TestAbsentAgentStillWaitsFindTimeout(t *testing.T) {
	testtier.Full(t, "waits out the find timeout (2 s)")
	const find = 2 * time.Second
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) { c.FindTimeout = find }})
	start := time.Now()
	_, err := testgrpc.NewUnimplementedServiceClient(e.Public).UnimplementedCall(testenv.AgentCtx(boundedCtx(t), 99), &testpb.Empty{})
	st := status.Convert(err)
	if st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "agent 99 for /grpc.testing.UnimplementedService/UnimplementedCall within 2s") {
		t.Fatalf("agent not connected: %v", err)
	}
	// A lower bound only: kas waited at least the find timeout, as it did before.
	if d := time.Since(start); d < find {
		t.Fatalf("gave up after %s, before the find timeout", d)
	}
}

// upgradedService is the new agent version's service: the old one does not serve it.
type upgradedService struct {
	testgrpc.UnimplementedUnimplementedServiceServer
}

func (upgradedService) UnimplementedCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func TestAgentUpgradedWithinGraceServesWaitingCall(t *testing.T) {
	var upgraded atomic.Bool
	e := testenv.Start(t, testenv.Options{
		Kas: func(c *kas.Config) {
			longFindTimeout(c)
			c.UnservedGrace = testBound // room for a new agent to start on a busy machine
		},
		Register: func(_ int64, a *tunclient.Agent) {
			if upgraded.Load() {
				testgrpc.RegisterUnimplementedServiceServer(a, upgradedService{})
			}
		},
	})
	old := e.Agents[1]
	errc := make(chan error, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 2*testBound)
	defer cancel()
	go func() {
		_, err := testgrpc.NewUnimplementedServiceClient(e.Public).UnimplementedCall(testenv.AgentCtx(ctx, 1), &testpb.Empty{})
		errc <- err
	}()
	testenv.Eventually(t, testBound, func() bool { return e.Kas.Registry().Stats().WaitingCalls == 1 }, "the call never waited")
	upgraded.Store(true)
	e.StartAgent(1) // the new version connects, then the old one leaves
	e.StopAgent(old)
	if err := <-errc; err != nil {
		t.Fatalf("call during the agent's upgrade: %v", err)
	}
}

// grpcurl's reflection client tries a failed call three times at once on the same connection; only the
// first waits.
func TestRepeatedCallAnsweredAtOnce(t *testing.T) {
	testtier.Full(t, "waits out find timeouts and the repeat window (3 s)")
	const find = 2 * time.Second
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) { c.FindTimeout = find }})
	c := testgrpc.NewUnimplementedServiceClient(e.Public)
	_, err := c.UnimplementedCall(testenv.AgentCtx(boundedCtx(t), 99), &testpb.Empty{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("first call: %v", err)
	}
	for i := 2; i <= 3; i++ {
		_, err := c.UnimplementedCall(testenv.AgentCtx(boundedCtx(t), 99), &testpb.Empty{})
		st := status.Convert(err)
		if st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "kas did not wait again") {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	// The agent connects: the same call is served, not answered from memory.
	_, err = c.UnimplementedCall(testenv.AgentCtx(boundedCtx(t), 1), &testpb.Empty{})
	wantUnserved(t, "connected agent", err, "UnimplementedCall")
	_, err = c.UnimplementedCall(testenv.AgentCtx(boundedCtx(t), 1), &testpb.Empty{})
	if st := status.Convert(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "kas did not wait again") {
		t.Fatalf("repeated unserved call: %v", err)
	}
}

func TestUnservedThroughOtherKas(t *testing.T) {
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{Kas: func(_ int, kc *kas.Config) { longFindTimeout(kc) }})
	c.StartAgent(1, 0)
	_, err := testgrpc.NewUnimplementedServiceClient(c.Public[1]).UnimplementedCall(testenv.AgentCtx(boundedCtx(t), 1), &testpb.Empty{})
	wantUnserved(t, "via the kas without the agent", err, "/grpc.testing.UnimplementedService/UnimplementedCall")
	// The served methods still go through.
	if _, err := testgrpc.NewTestServiceClient(c.Public[1]).EmptyCall(testenv.AgentCtx(boundedCtx(t), 1), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
}
