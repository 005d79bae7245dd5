package runner

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
)

// fakeLoad is a loadGen without a topology: its calls go to entry kas calls[i], which run do.
func fakeLoad(t *testing.T, l scenario.Workload, kas, maxInFlight int, do func(ctx context.Context, entry int) error) (*loadGen, *atomic.Int64) {
	t.Helper()
	sc := &scenario.Scenario{Name: "fake", Topology: scenario.Topology{Kas: kas, Agents: 3}, Load: l}
	var factories atomic.Int64
	g := &loadGen{
		sc: sc, rec: &recorder{}, obs: (*harnessmetrics.Metrics)(nil).Observer(sc.Name), targets: l.TargetAgents(sc.Topology),
		alive:       func() []int { return []int{0, 1}[:kas] },
		maxInFlight: maxInFlight,
	}
	for i := range kas {
		g.calls = append(g.calls, func() load.Call {
			factories.Add(1)
			return func(ctx context.Context) (int, error) { return 0, do(agentMeta(ctx), i) }
		})
	}
	return g, &factories
}

func workload(rate float64, workers int, d, timeout time.Duration) scenario.Workload {
	return scenario.Workload{Shape: "unary", Rate: rate, Workers: workers, Duration: d, CallTimeout: timeout, Entry: scenario.EntryAll, Targets: scenario.TargetsAll}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestLoadMissed: when the calls in flight are at their bound until the load ends, the calls still due
// are missed: counted in the summary, offered in the timeline, and the one-outcome invariant holds.
func TestLoadMissed(t *testing.T) {
	// A call every 10 ms from 10 ms to 290 ms (29 calls); the only call allowed in flight lasts until
	// its 1 s timeout, past the end of the load.
	g, _ := fakeLoad(t, workload(100, 0, 300*time.Millisecond, time.Second), 1, 1, func(ctx context.Context, _ int) error {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	})
	if err := g.run(testContext(t)); err != nil {
		t.Fatal(err)
	}
	sum := &Summary{}
	tl := summarizeCalls(sum, g.sc, g.rec)
	checkInvariants(sum, g.sc, g.rec, 0)
	if sum.Calls.Sent != 1 || sum.Calls.Missed != 28 || sum.Calls.FailedByCode[codes.DeadlineExceeded.String()] != 1 {
		t.Fatalf("calls %+v; want 1 sent (deadline exceeded) and 28 missed", sum.Calls)
	}
	var offered int64
	for _, s := range tl {
		offered += s.Offered
	}
	if offered != 29 {
		t.Errorf("%d calls offered in the timeline, want 29 (sent and missed)", offered)
	}
	if o := sum.Objectives[0]; o.Name != "invariant: one outcome per call" || !o.OK || o.Got != "1 = 0 + 1 (and 28 missed)" {
		t.Errorf("invariant %+v", o)
	}
	// The scenario bounds no failures, so its one failed call fails the run.
	if o := sum.Objectives[len(sum.Objectives)-1]; o.Name != "invariant: no failed call (the scenario bounds no failures)" || o.OK || o.Got != "1 failed (DeadlineExceeded 1)" {
		t.Errorf("failure invariant %+v", o)
	}
}

// TestLoadTargetsAndEntries: an open loop's calls go to the target agents in turn, through every live
// kas, each with a call of its own; every call is recorded with the agent it was routed to.
func TestLoadTargetsAndEntries(t *testing.T) {
	var mu sync.Mutex
	routed := map[int64]int{}
	entries := map[int]int{}
	g, factories := fakeLoad(t, workload(200, 0, 300*time.Millisecond, time.Second), 2, 0, func(ctx context.Context, entry int) error {
		md, _ := metadata.FromOutgoingContext(ctx)
		id, _ := strconv.ParseInt(md.Get(rpc.RoutingAgentIDMetadataKey)[0], 10, 64)
		mu.Lock()
		defer mu.Unlock()
		routed[id]++
		entries[entry]++
		return nil
	})
	g.maxInFlight = DefaultMaxInFlight(g.sc.Load)
	if err := g.run(testContext(t)); err != nil {
		t.Fatal(err)
	}
	n := len(g.rec.records)
	if n == 0 || g.rec.missed != 0 || len(g.rec.offered) != n || factories.Load() != int64(n) {
		t.Fatalf("%d calls, %d missed, %d offered, %d calls made; want every offered call sent with a call of its own", n, g.rec.missed, len(g.rec.offered), factories.Load())
	}
	recorded := map[int64]int{}
	for _, r := range g.rec.records {
		recorded[r.agent]++
		if r.code != codes.OK {
			t.Errorf("call to agent %d: %v", r.agent, r.code)
		}
	}
	for id := int64(1); id <= 3; id++ {
		if routed[id] != recorded[id] || routed[id] < n/3 || routed[id] > n/3+1 {
			t.Errorf("agent %d: %d routed, %d recorded, want %d/3 each", id, routed[id], recorded[id], n)
		}
	}
	if entries[0] < n/2 || entries[1] < n/2 {
		t.Errorf("entries %v, want the %d calls spread over kas 0 and 1", entries, n)
	}
}

// TestLoadClosedLoop: a closed loop's workers keep one call per entry kas and every call is offered.
func TestLoadClosedLoop(t *testing.T) {
	g, factories := fakeLoad(t, workload(0, 3, 200*time.Millisecond, time.Second), 2, 0, func(ctx context.Context, _ int) error {
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	if err := g.run(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(g.rec.records); n == 0 || len(g.rec.offered) != n || g.rec.missed != 0 {
		t.Fatalf("%d calls, %d offered, %d missed", n, len(g.rec.offered), g.rec.missed)
	}
	if f := factories.Load(); f > 3*2 {
		t.Errorf("%d calls made for 3 workers and 2 kas, want at most 6", f)
	}
}

func TestDefaultMaxInFlight(t *testing.T) {
	for _, c := range []struct {
		l    scenario.Workload
		want int
	}{
		{workload(300, 0, time.Minute, 10*time.Second), 300*11 + 1},
		{workload(0.5, 0, time.Minute, 10*time.Second), 7},
		{workload(1e6, 0, time.Minute, time.Hour), 1<<31 - 1},
	} {
		if got := DefaultMaxInFlight(c.l); got != c.want {
			t.Errorf("rate %v, timeout %v: %d, want %d", c.l.Rate, c.l.CallTimeout, got, c.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Error(err)
	}
	if err := (Options{MaxInFlight: -1}).Validate(); err == nil {
		t.Error("a negative MaxInFlight was accepted")
	}
	if _, err := Run(t.Context(), &scenario.Scenario{}, Options{MaxInFlight: -1}); err == nil {
		t.Error("Run accepted invalid options")
	}
}
