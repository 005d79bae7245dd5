package kas_test

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// eagerCount reads kas i's tunnel_routing_eager_total for result ("taken" or "missed"); 0 when absent.
func eagerCount(t *testing.T, c *testenv.Cluster, i int, result string) float64 {
	t.Helper()
	return max(testenv.Value(testenv.Scrape(t, c.Metrics[i])["tunnel_routing_eager_total"], "result", result), 0)
}

func unary(t *testing.T, client testgrpc.TestServiceClient, size int, kv ...string) {
	t.Helper()
	body := bytes.Repeat([]byte{7}, size)
	resp, err := client.UnaryCall(testenv.AgentCtx(testCtx(t), 1, kv...), &testpb.SimpleRequest{
		ResponseSize: int32(size), Payload: &testpb.Payload{Body: body}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetPayload().GetBody()) != size {
		t.Fatalf("%d bytes back, want %d", len(resp.GetPayload().GetBody()), size)
	}
}

// streamIn sends n messages of size bytes on one client stream and checks the agent saw them all.
func streamIn(t *testing.T, client testgrpc.TestServiceClient, n, size int) {
	t.Helper()
	s, err := client.StreamingInputCall(testenv.AgentCtx(testCtx(t), 1))
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := s.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, size)}}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := s.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	if got := int(resp.GetAggregatedPayloadSize()); got != n*size {
		t.Fatalf("the agent saw %d bytes, want %d", got, n*size)
	}
}

func TestEagerGatewaySkipsTheFind(t *testing.T) {
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{})
	ae := c.StartAgent(1, 1)
	client := testgrpc.NewTestServiceClient(c.Public[0])
	// Three calls: the first searches and finds the agent at kas 2, the next two go eager. Every call
	// shape, metadata and status pass unchanged on eager streams.
	checkRoutedCalls(t, "eager", client, ae.Service)
	if taken, missed := eagerCount(t, c, 0, "taken"), eagerCount(t, c, 0, "missed"); taken != 2 || missed != 0 {
		t.Fatalf("eager taken %v, missed %v; want 2 and 0", taken, missed)
	}
	for range 20 {
		unary(t, client, 64)
	}
	// A request larger than the replay limit: the gateway gets the rest once it took the call.
	streamIn(t, client, 6, 1<<20)
	if taken, missed := eagerCount(t, c, 0, "taken"), eagerCount(t, c, 0, "missed"); taken != 23 || missed != 0 {
		t.Fatalf("eager taken %v, missed %v; want 23 and 0", taken, missed)
	}
}

func TestEagerGatewayMissReplaysTheCall(t *testing.T) {
	c := testenv.StartCluster(t, 3, testenv.ClusterOptions{})
	ae := c.StartAgent(1, 1)
	client := testgrpc.NewTestServiceClient(c.Public[0])
	unary(t, client, 64)
	unary(t, client, 64) // eager, to kas 2
	// The agent moves to kas 3: kas 2 has no tunnel for the eager stream, and the call must still be
	// answered (through the search), with its whole request: 6 MiB, more than the replay limit.
	c.StopAgent(ae)
	c.StartAgent(1, 2)
	testenv.Eventually(t, 10*time.Second, func() bool { return c.Kas[1].Registry().Stats().IdleTunnels == 0 },
		"kas 2 still holds tunnels of the stopped agent")
	streamIn(t, client, 6, 1<<20)
	if missed := eagerCount(t, c, 0, "missed"); missed != 1 {
		t.Fatalf("eager missed %v times, want 1", missed)
	}
	taken := eagerCount(t, c, 0, "taken")
	unary(t, client, 64) // eager again, to kas 3
	if got := eagerCount(t, c, 0, "taken"); got != taken+1 {
		t.Fatalf("eager taken %v, want %v", got, taken+1)
	}
}

// Kas of an older version on either side work with a newer one, every call shape included: kas before
// eager streams never see one, and kas that know only their first version (no late tunnel_ready, no
// batches) still take them.
func TestEagerGatewayVersionSkew(t *testing.T) {
	for _, tc := range []struct {
		name  string
		old   func(*kas.Config)
		taken float64 // eager calls of the 8 after the first, which searches
	}{
		{"before eager streams", func(c *kas.Config) { c.NoEagerGateway = true }, 0},
		{"eager streams' first version", func(c *kas.Config) { c.EagerGatewayV1 = true }, 8},
	} {
		for _, old := range []int{0, 1} {
			c := testenv.StartCluster(t, 2, testenv.ClusterOptions{Kas: func(i int, cfg *kas.Config) {
				if i == old {
					tc.old(cfg)
				}
			}})
			ae := c.StartAgent(1, 1)
			client := testgrpc.NewTestServiceClient(c.Public[0])
			checkRoutedCalls(t, "old kas", client, ae.Service)
			for range 5 {
				unary(t, client, 64)
			}
			streamIn(t, client, 6, 1<<20)
			if taken, missed := eagerCount(t, c, 0, "taken"), eagerCount(t, c, 0, "missed"); taken != tc.taken || missed != 0 {
				t.Fatalf("%s at kas %d: eager taken %v, missed %v; want %v and 0", tc.name, old+1, taken, missed, tc.taken)
			}
		}
	}
}

// A caller's own kas-hop-gateway-eager never makes a stream eager: on a searched stream the gateway
// would take start_streaming for the request.
func TestEagerGatewayCallerKeyIgnored(t *testing.T) {
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{Kas: func(i int, cfg *kas.Config) {
		cfg.NoEagerGateway = i == 0 // kas 1 always searches
	}})
	c.StartAgent(1, 1)
	client := testgrpc.NewTestServiceClient(c.Public[0])
	for range 3 {
		unary(t, client, 64, rpc.GatewayEagerKey, "1")
	}
}

// An eager stream's tunnel_ready goes late, with the answer (rpc.GatewayEagerV2): when the gateway's
// tunnel dies before the call starts, its status says so with nothing sent before it, and the routing
// kas replays the call elsewhere.
func TestEagerV2TunnelLossReplaysTheCall(t *testing.T) {
	var armed, killed atomic.Int32
	hook := func(_ int64, kill func()) {
		if armed.Load() == 1 && killed.CompareAndSwap(0, 1) {
			kill()
		}
	}
	c := testenv.StartCluster(t, 3, testenv.ClusterOptions{Kas: func(_ int, c *kas.Config) { c.GatewayTunnelReadyHook = hook }})
	c.StartAgent(1, 1)
	c.StartAgent(1, 2)
	client := testgrpc.NewTestServiceClient(c.Public[0])
	unary(t, client, 64) // searched: kas 1 remembers the gateway
	armed.Store(1)
	unary(t, client, 64) // eager, and that gateway's tunnel dies as it takes the call
	if killed.Load() != 1 {
		t.Fatal("the hook did not break a tunnel")
	}
	if taken, missed := eagerCount(t, c, 0, "taken"), eagerCount(t, c, 0, "missed"); taken != 0 || missed != 1 {
		t.Fatalf("eager taken %v, missed %v; want 0 and 1", taken, missed)
	}
	unary(t, client, 64)
}
