package kas_test

import (
	"fmt"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// Calls through a second kas ride one hop stream after another: normal, cancelled, early-ending and
// deadline-exceeded calls alternate, each caller gets exactly its own answer (reuseCall checks the
// payload and a header tag), and only the calls the routing kas gave up on cost their stream.
func TestHopStreamsCarryCallAfterCall(t *testing.T) {
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{})
	c.StartAgent(1, 1)
	client := testgrpc.NewTestServiceClient(c.Public[0])
	unary(t, client, 64) // searched: kas 1 learns that kas 2 serves hop streams
	for range 50 {
		unary(t, client, 64)
	}
	if opened, reused := c.Kas[0].HopStreams(); opened != 1 || reused != 49 {
		t.Fatalf("50 calls after the search: %d hop streams opened, %d reused; want 1 and 49", opened, reused)
	}
	// A call whose service ends before reading all of its request leaves the rest behind on the stream:
	// the gateway drops it, and the stream carries the next call.
	for i := range 100 {
		if err := reuseCall(testCtx(t), client, 2*i); err != nil { // normal and early-ending, alternately
			t.Fatalf("call %d (kind %d): %v", 2*i, 2*i%int(reuseKinds), err)
		}
	}
	if opened, reused := c.Kas[0].HopStreams(); opened != 1 || reused != 149 {
		t.Fatalf("100 normal and early-ending calls more: %d hop streams opened, %d reused; want 1 and 149", opened, reused)
	}
	const calls = 400
	for i := range calls {
		if err := reuseCall(testCtx(t), client, i); err != nil {
			t.Fatalf("call %d (kind %d): %v", i, i%int(reuseKinds), err)
		}
	}
	// Each cancelled or deadline call ends its stream (at most one in two of these).
	opened, reused := c.Kas[0].HopStreams()
	if maxOpened := int64(1 + calls/2); opened > maxOpened || opened+reused < 150+calls/2 {
		t.Errorf("after %d mixed calls: %d hop streams opened, %d reused; want at most %d opened and at least %d calls on them",
			calls, opened, reused, maxOpened, 150+calls/2)
	}
	if v := testenv.Value(testenv.Scrape(t, c.Metrics[0])["tunnel_routing_hop_streams_total"], "event", "reused"); v != float64(reused) {
		t.Errorf("tunnel_routing_hop_streams_total{event=reused} is %v, want %d", v, reused)
	}
}

// Concurrent callers through a second kas share hop streams, every one with its own answers.
func TestHopStreamsUnderConcurrentCalls(t *testing.T) {
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{})
	c.StartAgent(1, 1)
	client := testgrpc.NewTestServiceClient(c.Public[0])
	unary(t, client, 64)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 60 {
				if err := reuseCall(testCtx(t), client, g*1000+i); err != nil {
					errs <- fmt.Errorf("caller %d call %d: %w", g, i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if _, reused := c.Kas[0].HopStreams(); reused == 0 {
		t.Error("no hop stream was reused")
	}
}

// Kas before hop streams on either side: the routing kas opens none, and every call shape works.
func TestHopStreamsVersionSkew(t *testing.T) {
	for _, old := range []int{0, 1} {
		c := testenv.StartCluster(t, 2, testenv.ClusterOptions{Kas: func(i int, cfg *kas.Config) {
			cfg.NoHopStreams = i == old
		}})
		ae := c.StartAgent(1, 1)
		client := testgrpc.NewTestServiceClient(c.Public[0])
		checkRoutedCalls(t, "old kas", client, ae.Service)
		for range 5 {
			unary(t, client, 64)
		}
		streamIn(t, client, 6, 1<<20)
		if opened, _ := c.Kas[0].HopStreams(); opened != 0 {
			t.Errorf("old kas %d: %d hop streams opened, want none", old+1, opened)
		}
		if taken := eagerCount(t, c, 0, "taken"); taken != 8 {
			t.Errorf("old kas %d: %v eager calls, want 8", old+1, taken)
		}
	}
}

// A gateway kas that shuts down gracefully ends its idle hop streams at once instead of waiting for
// them for its whole shutdown grace, and the routing kas's next call goes through a stream of its own.
func TestGracefulStopEndsIdleHopStreams(t *testing.T) {
	c := testenv.StartCluster(t, 3, testenv.ClusterOptions{Kas: func(i int, cfg *kas.Config) {
		if i == 1 {
			cfg.ShutdownGrace = time.Hour
		}
	}})
	c.StartAgent(1, 1)
	client := testgrpc.NewTestServiceClient(c.Public[0])
	unary(t, client, 64)
	unary(t, client, 64) // over a hop stream, kept idle afterwards
	if opened, _ := c.Kas[0].HopStreams(); opened != 1 {
		t.Fatalf("%d hop streams opened, want 1", opened)
	}
	stopped := make(chan struct{})
	go func() {
		c.StopKas(1) // bounded by 10 s: it returns either way
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		<-stopped
		t.Fatal("the graceful stop waited for an idle hop stream")
	}
	c.StartAgent(1, 2)
	unary(t, client, 64)
}
