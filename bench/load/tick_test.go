package load

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// tickLog is a ScheduleObserver that keeps what it is told, and the ticks its calls were given.
type tickLog struct {
	mu        sync.Mutex
	offered   int
	scheduled []Tick
	called    []Tick
	codes     []codes.Code
	// onScheduled, when set, sees each scheduled tick (under mu).
	onScheduled func(Tick)
}

func (l *tickLog) Offered(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.offered += n
}

func (l *tickLog) Call(_ time.Duration, code codes.Code) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.codes = append(l.codes, code)
}

func (l *tickLog) Scheduled(t Tick) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scheduled = append(l.scheduled, t)
	if l.onScheduled != nil {
		l.onScheduled(t)
	}
}

// newCall returns calls that log their tick and then run do.
func (l *tickLog) newCall(do func(context.Context) error) NewTickCall {
	return func() TickCall {
		return func(ctx context.Context, t Tick) (int, error) {
			l.mu.Lock()
			l.called = append(l.called, t)
			l.mu.Unlock()
			return 0, do(ctx)
		}
	}
}

// numbers are the ticks' N, sorted.
func numbers(ts []Tick) []uint64 {
	var ns []uint64
	for _, t := range ts {
		ns = append(ns, t.N)
	}
	slices.Sort(ns)
	return ns
}

// upTo is 0, 1, ..., n-1.
func upTo(n int) []uint64 {
	ns := make([]uint64, n)
	for i := range ns {
		ns[i] = uint64(i)
	}
	return ns
}

// TestOpenLoopTicks: every call of the schedule is numbered once, in the order it was due, and is
// given the tick the observer was told about.
func TestOpenLoopTicks(t *testing.T) {
	log := &tickLog{}
	gen := OpenLoop{Rate: 200, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond, MaxInFlight: 4, Observer: log}
	res, err := gen.RunTicks(testContext(t, 30*time.Second), log.newCall(func(context.Context) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	total := int(res.Calls + res.Missed)
	if len(log.scheduled) != total || log.offered != total || len(log.codes) != int(res.Calls) {
		t.Fatalf("%d scheduled, %d offered, %d observed; want %d calls + %d missed", len(log.scheduled), log.offered, len(log.codes), res.Calls, res.Missed)
	}
	if got := numbers(log.scheduled); !slices.Equal(got, upTo(total)) {
		t.Errorf("scheduled numbers %v, want 0..%d", got, total-1)
	}
	for i := 1; i < len(log.scheduled); i++ {
		if log.scheduled[i].Due.Before(log.scheduled[i-1].Due) {
			t.Errorf("tick %d due before tick %d", i, i-1)
		}
	}
	// The warm-up's calls get ticks too, but only the timed run's are scheduled.
	timed := log.called[len(log.called)-int(res.Calls):]
	for _, c := range timed {
		if c.N >= uint64(total) || !log.scheduled[c.N].Due.Equal(c.Due) {
			t.Errorf("call %d was due at %v, the schedule says otherwise", c.N, c.Due)
		}
	}
}

// TestOpenLoopMissedAreScheduled: the calls an open loop could not start are offered and scheduled
// like the others, so that offered = calls + missed.
func TestOpenLoopMissedAreScheduled(t *testing.T) {
	// The schedule has a call every 10 ms from 10 ms to 290 ms: 29 calls. The only worker is held by
	// the first until the scheduler has given up on the rest.
	const schedule = 29
	release := make(chan struct{})
	log := &tickLog{onScheduled: func(t Tick) {
		if t.N == schedule-1 {
			close(release)
		}
	}}
	ctx := testContext(t, 30*time.Second)
	gen := OpenLoop{Rate: 100, Duration: 300 * time.Millisecond, MaxInFlight: 1, Observer: log}
	res, err := gen.RunTicks(ctx, log.newCall(func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != 1 || res.Missed != schedule-1 {
		t.Fatalf("%d calls, %d missed; want 1 and %d", res.Calls, res.Missed, schedule-1)
	}
	if log.offered != schedule || !slices.Equal(numbers(log.scheduled), upTo(schedule)) {
		t.Errorf("offered %d, scheduled %v; want the whole schedule (%d)", log.offered, numbers(log.scheduled), schedule)
	}
}

// TestClosedLoopTicks: a closed loop numbers its calls once each and tells the observer when each
// started.
func TestClosedLoopTicks(t *testing.T) {
	log := &tickLog{}
	const calls = 50
	gen := ClosedLoop{Workers: 4, Duration: 20 * time.Second, MaxCalls: calls, Observer: log}
	res, err := gen.RunTicks(testContext(t, 30*time.Second), log.newCall(func(context.Context) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != calls || log.offered != calls || len(log.codes) != calls {
		t.Fatalf("%d calls, %d offered, %d observed; want %d", res.Calls, log.offered, len(log.codes), calls)
	}
	if !slices.Equal(numbers(log.scheduled), upTo(calls)) || !slices.Equal(numbers(log.called), upTo(calls)) {
		t.Errorf("scheduled %v, called %v; want 0..%d once each", numbers(log.scheduled), numbers(log.called), calls-1)
	}
}

// TestPlainObserverSeesNoTicks: an Observer that is not a ScheduleObserver is only counted, and Run's
// calls work as before.
func TestPlainObserverSeesNoTicks(t *testing.T) {
	var o countingObserver
	res, err := ClosedLoop{Workers: 2, Duration: 20 * time.Second, MaxCalls: 10, Observer: &o}.Run(testContext(t, 30*time.Second), trivialCall)
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != 10 || o.offered != 10 || o.calls != 10 {
		t.Errorf("%d calls, %d offered, %d observed; want 10 of each", res.Calls, o.offered, o.calls)
	}
}

type countingObserver struct {
	mu             sync.Mutex
	offered, calls int
}

func (o *countingObserver) Offered(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.offered += n
}

func (o *countingObserver) Call(time.Duration, codes.Code) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
}
