package kas_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

func shortFind(c *kas.Config) { c.FindTimeout = 300 * time.Millisecond }

func TestHopMetadataNeverReachesAgent(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	for name, c := range callers(e) {
		ctx := testenv.AgentCtx(testCtx(t), 1,
			"kas-hop-secret", "no",
			"Kas-Hop-Other", "no",
			"authorization", "Bearer caller-secret",
			"proxy-authorization", "Basic x",
			"x-keep", "yes",
		)
		if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, s := range e.Agents[1].Service.Seen() {
		for k := range s.Metadata {
			if strings.HasPrefix(k, rpc.RoutingHopPrefix) || k == "authorization" || k == "proxy-authorization" {
				t.Errorf("%s: %q reached the service", s.Method, k)
			}
		}
		if s.Metadata.Get("x-keep")[0] != "yes" {
			t.Errorf("x-keep lost: %v", s.Metadata)
		}
	}
}

func TestBadAgentID(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	cases := map[string]metadata.MD{
		"missing":   metadata.Pairs("x", "y"),
		"repeated":  metadata.Pairs(rpc.RoutingAgentIDMetadataKey, "1", rpc.RoutingAgentIDMetadataKey, "1"),
		"not int":   metadata.Pairs(rpc.RoutingAgentIDMetadataKey, "one"),
		"too large": metadata.Pairs(rpc.RoutingAgentIDMetadataKey, "9223372036854775808"),
	}
	for name, md := range cases {
		for cname, c := range callers(e) {
			_, err := c.EmptyCall(metadata.NewOutgoingContext(testCtx(t), md), &testpb.Empty{})
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), rpc.RoutingAgentIDMetadataKey) {
				t.Errorf("%s via %s: %v", name, cname, err)
			}
		}
	}
}

func TestFindTimeout(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kas: shortFind})
	timeouts := func() float64 {
		return testenv.Value(testenv.Scrape(t, e.Metrics)["tunnel_routing_timeout_total"])
	}
	before := timeouts()
	c := testgrpc.NewTestServiceClient(e.Public)
	// An agent that is not connected.
	_, err := c.EmptyCall(testenv.AgentCtx(testCtx(t), 99), &testpb.Empty{})
	st := status.Convert(err)
	if st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "agent 99") || !strings.Contains(st.Message(), "not connected") {
		t.Fatalf("unknown agent: %v", err)
	}
	// A method the agent does not serve, when the find timeout is shorter than the unserved grace (else
	// Unimplemented, see unserved_test.go).
	_, err = testgrpc.NewUnimplementedServiceClient(e.Kas.InternalConn()).UnimplementedCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{})
	st = status.Convert(err)
	if st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "UnimplementedCall") {
		t.Fatalf("unknown method: %v", err)
	}
	if got := timeouts() - max(before, 0); got != 2 {
		t.Fatalf("timeout counter moved by %v, want 2", got)
	}
	// The call waited the find timeout, not the caller's own, longer deadline.
	start := time.Now()
	_, _ = c.EmptyCall(testenv.AgentCtx(testCtx(t), 98), &testpb.Empty{})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("find took %v", d)
	}
	// Nothing waits any more.
	testenv.Eventually(t, 5*time.Second, func() bool { return e.Kas.Registry().Stats().WaitingCalls == 0 }, "calls still waiting")
}

func TestCallBeforeTunnel(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Agents: -1})
	c := testgrpc.NewTestServiceClient(e.Public)
	errc := make(chan error, 1)
	go func() {
		_, err := c.UnaryCall(testenv.AgentCtx(testCtx(t), 1), &testpb.SimpleRequest{ResponseSize: 10})
		errc <- err
	}()
	testenv.Eventually(t, 5*time.Second, func() bool { return e.Kas.Registry().Stats().WaitingCalls == 1 }, "the call never waited")
	e.StartAgent(1)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call was never served")
	}
}

func TestManyConcurrentCallsScaleThePool(t *testing.T) {
	const calls = 1000
	e := testenv.Start(t, testenv.Options{
		Kas: func(c *kas.Config) { c.FindTimeout = 30 * time.Second },
		Agent: func(_ int64, c *tunclient.Config) {
			c.MaxIdleTime = 300 * time.Millisecond
		},
	})
	a := e.Agents[1].Agent
	testenv.Eventually(t, 5*time.Second, func() bool { return a.Stats().Idle == tunclient.DefaultMinIdle }, "pool did not start at min idle: %+v", a.Stats())
	c := testgrpc.NewTestServiceClient(e.Public)
	ctx := testenv.AgentCtx(testCtx(t), 1)
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	var peak int
	var peakMu sync.Mutex
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 8, IntervalUs: 20000}}})
			if err == nil {
				_, err = s.Recv()
				for err == nil {
					_, err = s.Recv()
				}
				if status.Code(err) == codes.OK || err.Error() == "EOF" {
					err = nil
				}
			}
			st := a.Stats()
			peakMu.Lock()
			peak = max(peak, st.Busy+st.Idle+st.Connecting)
			peakMu.Unlock()
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if peak <= tunclient.DefaultMinIdle*5 {
		t.Fatalf("pool peaked at %d tunnels: it did not scale up", peak)
	}
	if peak > tunclient.DefaultMaxConnections {
		t.Fatalf("pool peaked at %d tunnels, above the maximum", peak)
	}
	testenv.Eventually(t, 20*time.Second, func() bool {
		st := a.Stats()
		return st.Idle == tunclient.DefaultMinIdle && st.Busy == 0 && st.Connecting == 0
	}, "pool did not shrink back to %d idle tunnels: %+v", tunclient.DefaultMinIdle, a.Stats())
	t.Logf("peak %d tunnels", peak)
}

func TestWrongAgentToken(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Agents: -1})
	conn, err := tunclient.DialKas(e.Kas.Addrs().Agent.String(), "wrong-token")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cs, err := conn.NewStream(testCtx(t), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/tunnelbench.rpc.v1.ReverseTunnel/Connect")
	if err != nil {
		t.Fatal(err)
	}
	var m testpb.Empty
	if err := cs.RecvMsg(&m); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
}

var _ = context.Background
