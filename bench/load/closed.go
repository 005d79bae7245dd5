package load

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ClosedLoop runs Workers callers back to back: each starts its next call when the previous one ends.
// Warm-up calls are made first and not recorded.
type ClosedLoop struct {
	Workers  int
	Warmup   time.Duration
	Duration time.Duration
	// MaxCalls stops the timed run after this many calls in total; zero means no limit.
	MaxCalls int64
	// Observer, when set, sees every timed call, offered as it starts; a ScheduleObserver also sees its
	// Tick.
	Observer Observer
}

// Run implements Generator.
func (c ClosedLoop) Run(ctx context.Context, newCall NewCall) (*Result, error) {
	return c.RunTicks(ctx, ticked(newCall))
}

// RunTicks is Run for calls that are told their Tick: each call's number in the run and when it
// started.
func (c ClosedLoop) RunTicks(ctx context.Context, newCall NewTickCall) (*Result, error) {
	if c.Workers < 1 || c.Duration <= 0 {
		return nil, errors.New("closed loop needs at least one worker and a positive duration")
	}
	if c.Warmup > 0 {
		c.phase(ctx, newCall, c.Warmup, 0, nil)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rs := make([]*recorder, c.Workers)
	for i := range rs {
		rs[i] = newRecorder()
		rs[i].obs = c.Observer
	}
	before := mallocs()
	elapsed := c.phase(ctx, newCall, c.Duration, c.MaxCalls, rs)
	return merge(rs, elapsed, mallocs()-before), nil
}

// phase runs the workers for d (or maxCalls calls) and returns the time it took. With nil recorders
// nothing is recorded (warm-up).
func (c ClosedLoop) phase(ctx context.Context, newCall NewTickCall, d time.Duration, maxCalls int64, rs []*recorder) time.Duration {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	deadline := start.Add(d)
	var (
		wg    sync.WaitGroup
		next  atomic.Uint64
		offer offerer
	)
	if rs != nil {
		offer = newOfferer(c.Observer)
	}
	// take numbers the next call, or says that the run has made its maxCalls.
	take := func() (uint64, bool) {
		n := next.Add(1) - 1
		return n, maxCalls <= 0 || n < uint64(maxCalls)
	}
	for w := range c.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call := newCall()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				n, ok := take()
				if !ok {
					return
				}
				offer.offered()
				t := Tick{N: n, Due: time.Now()}
				offer.scheduled(t)
				bytes, err := call(ctx, t)
				if rs != nil && ctx.Err() == nil {
					rs[w].record(time.Since(t.Due), bytes, err)
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
