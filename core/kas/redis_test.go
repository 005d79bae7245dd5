package kas_test

import (
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
	"github.com/tunnelbench/tunnelbench/internal/testredis"
)

func redisTracker(t *testing.T, addr string, ttl, refresh time.Duration) *tracker.Redis {
	t.Helper()
	r, err := tracker.NewRedis(tracker.RedisConfig{Address: addr, TTL: ttl, RefreshPeriod: refresh, OpTimeout: 500 * time.Millisecond, DialTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestTwoHopRoutingWithRedis(t *testing.T) {
	rs := testredis.Start(t)
	c := testenv.StartCluster(t, 3, testenv.ClusterOptions{Tracker: redisTracker(t, rs.Addr(), 0, 0)})
	ae := c.StartAgent(1, 2)
	testenv.Eventually(t, 5*time.Second, func() bool {
		urls, err := c.Tracker.KasURLs(testCtx(t), 1)
		return err == nil && len(urls) == 1
	}, "agent 1 never registered in Redis")
	for i, name := range []string{"kas1", "kas2"} {
		checkRoutedCalls(t, name+" public", testgrpc.NewTestServiceClient(c.Public[i]), ae.Service)
	}
}

func TestRedisOutage(t *testing.T) {
	rs := testredis.Start(t)
	short := func(_ int, cfg *kas.Config) {
		cfg.TrackerRefresh = 300 * time.Millisecond
		cfg.FindTimeout = 2 * time.Second
	}
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{Tracker: redisTracker(t, rs.Addr(), 3*time.Second, 300*time.Millisecond), Kas: short})
	c.StartAgent(1, 1)
	c.StartAgent(2, 1)
	local := testgrpc.NewTestServiceClient(c.Public[1])
	remote := testgrpc.NewTestServiceClient(c.Public[0])
	call := func(cl testgrpc.TestServiceClient, id int64) error {
		_, err := cl.EmptyCall(testenv.AgentCtx(testCtx(t), id), &testpb.Empty{})
		return err
	}
	testenv.Eventually(t, 5*time.Second, func() bool { return call(remote, 1) == nil }, "remote routing never worked")
	testenv.Eventually(t, 5*time.Second, func() bool {
		urls, err := c.Tracker.KasURLs(testCtx(t), 2)
		return err == nil && len(urls) == 1
	}, "agent 2 never registered in Redis")

	rs.Stop()
	for i := range 20 {
		if err := call(local, 1); err != nil {
			t.Fatalf("local call %d with Redis down: %v", i, err)
		}
	}
	// kas 1 remembers where it found agent 1 (an eager gateway): no tracker question, no outage.
	for i := range 5 {
		if err := call(remote, 1); err != nil {
			t.Fatalf("remote call %d to an agent found before, with Redis down: %v", i, err)
		}
	}
	// Agent 2 was never called from kas 1: finding it needs the tracker.
	if err := call(remote, 2); err == nil {
		t.Log("remote call succeeded with Redis down (a poll answered before the stop)")
	}
	errs := testenv.Value(testenv.Scrape(t, c.Metrics[0])[kas.TrackerErrorsMetric+"_total"], "op", "list")
	if errs < 1 {
		t.Fatalf("tracker errors not counted: %v", errs)
	}

	rs.Restart() // empty: the records come back with the next refresh
	testenv.Eventually(t, 10*time.Second, func() bool { return call(remote, 2) == nil }, "remote routing did not recover after Redis returned")
}

func TestTrackerEntriesOfDeadKasExpire(t *testing.T) {
	rs := testredis.Start(t)
	tr := redisTracker(t, rs.Addr(), 500*time.Millisecond, 200*time.Millisecond)
	if err := tr.Register(testCtx(t), "grpc://127.0.0.1:1", 5); err != nil {
		t.Fatal(err)
	}
	// A kas that crashed never unregisters: its record must go by itself.
	testenv.Eventually(t, 5*time.Second, func() bool {
		urls, err := tr.KasURLs(testCtx(t), 5)
		return err == nil && len(urls) == 0
	}, "the record of a dead kas did not expire")
}
