package load

import (
	"context"
	"errors"
	"sync"
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
	// Observer, when set, sees every timed call.
	Observer Observer
}

// Run implements Generator.
func (c ClosedLoop) Run(ctx context.Context, newCall NewCall) (*Result, error) {
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
func (c ClosedLoop) phase(ctx context.Context, newCall NewCall, d time.Duration, maxCalls int64, rs []*recorder) time.Duration {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	deadline := start.Add(d)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		issued int64
	)
	take := func() bool {
		if maxCalls <= 0 {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		if issued >= maxCalls {
			return false
		}
		issued++
		return true
	}
	for w := range c.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call := newCall()
			for ctx.Err() == nil && time.Now().Before(deadline) && take() {
				if rs != nil && c.Observer != nil {
					c.Observer.Offered(1)
				}
				t0 := time.Now()
				n, err := call(ctx)
				if rs != nil && ctx.Err() == nil {
					rs[w].record(time.Since(t0), n, err)
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
