package load

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func trivialCall() Call {
	return func(context.Context) (int, error) { return 1, nil }
}

// TestOpenLoopHoldsRate: 400 calls/s for 1.5 s sends about 600 calls, whatever the calls cost. This is
// a count, not a timing assertion: the schedule fixes it.
func TestOpenLoopHoldsRate(t *testing.T) {
	gen := OpenLoop{Rate: 400, Duration: 1500 * time.Millisecond, Warmup: 100 * time.Millisecond, MaxInFlight: 8}
	res, err := gen.Run(testContext(t, 30*time.Second), trivialCall)
	if err != nil {
		t.Fatal(err)
	}
	want := gen.Rate * gen.Duration.Seconds()
	if d := float64(res.Calls)/want - 1; d < -0.03 || d > 0.03 {
		t.Errorf("%d calls, want %.0f ± 3%%", res.Calls, want)
	}
	if res.Missed != 0 || res.Errors != 0 || res.Bytes != res.Calls {
		t.Errorf("missed %d errors %d bytes %d", res.Missed, res.Errors, res.Bytes)
	}
	if res.Offered != 400 {
		t.Errorf("offered %v, want 400", res.Offered)
	}
	if res.Elapsed < gen.Duration {
		t.Errorf("elapsed %v shorter than the duration", res.Elapsed)
	}
}

// TestOpenLoopLatencyFromSchedule: one call blocks the only worker for 150 ms; the calls scheduled
// meanwhile start late and their latency includes the wait. A closed loop (or an open loop timing
// from the actual start) would show one slow call only.
func TestOpenLoopLatencyFromSchedule(t *testing.T) {
	const block = 150 * time.Millisecond
	var n atomic.Int64
	newCall := func() Call {
		return func(context.Context) (int, error) {
			if n.Add(1) == 10 {
				time.Sleep(block)
			}
			return 0, nil
		}
	}
	gen := OpenLoop{Rate: 200, Duration: 600 * time.Millisecond, MaxInFlight: 1}
	res, err := gen.Run(testContext(t, 30*time.Second), newCall)
	if err != nil {
		t.Fatal(err)
	}
	if res.Missed != 0 {
		t.Fatalf("missed %d calls; the backlog should have drained long before the end", res.Missed)
	}
	if want := int64(gen.Rate * gen.Duration.Seconds()); res.Calls < want*97/100 {
		t.Errorf("%d calls, want about %d: queued calls must still be sent", res.Calls, want)
	}
	if max := res.Latency.Max(); max < block.Microseconds() {
		t.Errorf("max latency %d µs, want at least the block (%v)", max, block)
	}
	// Calls are due every 5 ms: the ~10 scheduled in the block's first 50 ms waited at least 100 ms.
	if slow := countAtLeast(res, 100*time.Millisecond); slow < 8 {
		t.Errorf("%d calls took 100 ms or more, want the blocked one and those queued behind it (about 11)", slow)
	}
}

// TestOpenLoopMissed: when every worker is busy until the end, the rest of the schedule is counted as
// missed, not silently dropped.
func TestOpenLoopMissed(t *testing.T) {
	newCall := func() Call {
		return func(context.Context) (int, error) {
			time.Sleep(400 * time.Millisecond)
			return 0, nil
		}
	}
	gen := OpenLoop{Rate: 100, Duration: 300 * time.Millisecond, MaxInFlight: 1}
	res, err := gen.Run(testContext(t, 30*time.Second), newCall)
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != 1 {
		t.Fatalf("%d calls, want 1 (the only worker is busy for the whole run)", res.Calls)
	}
	// The schedule has a call every 10 ms from 10 ms to 290 ms: 29 calls.
	if total := res.Calls + res.Missed; total < 28 || total > 30 {
		t.Errorf("calls %d + missed %d = %d, want the whole schedule (29)", res.Calls, res.Missed, total)
	}
	if res.Latency.Max() < (400 * time.Millisecond).Microseconds() {
		t.Errorf("the call that ran has latency %d µs, want at least 400 ms", res.Latency.Max())
	}
}

// TestOpenLoopBoundsInFlight: never more than MaxInFlight calls at once, each worker with its own Call.
func TestOpenLoopBoundsInFlight(t *testing.T) {
	var inFlight, peak, made atomic.Int64
	newCall := func() Call {
		made.Add(1)
		return func(context.Context) (int, error) {
			now := inFlight.Add(1)
			for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			inFlight.Add(-1)
			return 0, nil
		}
	}
	gen := OpenLoop{Rate: 500, Duration: 200 * time.Millisecond, MaxInFlight: 3}
	res, err := gen.Run(testContext(t, 30*time.Second), newCall)
	if err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p > 3 {
		t.Errorf("%d calls in flight at once, want at most 3", p)
	}
	if m := made.Load(); m > 3 {
		t.Errorf("%d calls made by NewCall, want at most one per worker (3)", m)
	}
	if res.Missed == 0 {
		t.Errorf("no missed calls, but 3 workers of 20 ms cannot serve 500 calls/s")
	}
}

// TestOpenLoopCancel: a cancelled run returns promptly.
func TestOpenLoopCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(testContext(t, 30*time.Second))
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := OpenLoop{Rate: 100, Duration: time.Minute}.Run(ctx, trivialCall)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancelled run took %v", d)
	}
}

func TestOpenLoopValidate(t *testing.T) {
	for _, gen := range []OpenLoop{
		{Rate: 0, Duration: time.Second},
		{Rate: -1, Duration: time.Second},
		{Rate: 10},
		{Rate: 10, Duration: time.Second, Warmup: -1},
		{Rate: 10, Duration: time.Second, MaxInFlight: -1},
	} {
		if _, err := gen.Run(t.Context(), trivialCall); err == nil {
			t.Errorf("%+v: no error", gen)
		}
	}
}

func TestOpenLoopPacer(t *testing.T) {
	p := OpenLoop{Rate: 400}.Pacer()
	if p.Per != 2500*time.Microsecond || p.Freq != 1 {
		t.Errorf("pacer %v, want one call per 2.5ms", p)
	}
	if r := p.Rate(0); r < 399.99 || r > 400.01 {
		t.Errorf("pacer rate %v, want 400", r)
	}
}
