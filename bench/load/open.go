package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// DefaultMaxInFlight bounds an open loop's concurrent calls when OpenLoop.MaxInFlight is zero: enough
// for any rate the in-process topology can serve, small enough that a stalled target cannot make the
// generator start an unbounded number of goroutines.
const DefaultMaxInFlight = 1000

// OpenLoop sends calls at a fixed Rate, whether or not earlier calls have finished, paced by vegeta's
// ConstantPacer. Up to MaxInFlight calls run at once: a worker is started (with its own Call from
// NewCall) only when a call is due and every worker is busy.
//
// Latency is measured from each call's scheduled send time, not from when it started: when every worker
// is busy a call starts late and its latency includes the wait, so queueing is never hidden (no
// coordinated omission). The scheduled times follow the pacer's ideal timeline; a late timer wake-up
// of the scheduler (tens of microseconds) is therefore part of the latency too.
//
// The timed run lasts Duration. Calls already started then run to their end and are recorded; when all
// MaxInFlight workers are busy at the end, the calls the schedule still asks for are not started but
// counted in Result.Missed. Warm-up runs the same schedule for Warmup and records nothing.
type OpenLoop struct {
	// Rate is the offered load in calls per second.
	Rate     float64
	Duration time.Duration
	Warmup   time.Duration
	// MaxInFlight bounds the calls running at once; zero means DefaultMaxInFlight.
	MaxInFlight int
	// Observer, when set, sees every scheduled call (offered) and every timed call.
	Observer Observer
}

// Run implements Generator.
func (o OpenLoop) Run(ctx context.Context, newCall NewCall) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Warmup > 0 {
		o.phase(ctx, newCall, o.Warmup, false)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	before := mallocs()
	rs, missed, elapsed := o.phase(ctx, newCall, o.Duration, true)
	res := merge(rs, elapsed, mallocs()-before)
	res.Offered = o.Rate
	res.Missed = missed
	return res, nil
}

func (o OpenLoop) validate() error {
	var errs []error
	if !(o.Rate > 0 && o.Rate <= 1e9) {
		errs = append(errs, fmt.Errorf("open loop rate %v: want between 0 and 1e9 calls/s", o.Rate))
	}
	if o.Duration <= 0 || o.Warmup < 0 {
		errs = append(errs, errors.New("open loop needs a positive duration and a warm-up >= 0"))
	}
	if o.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("open loop max in flight %d: want >= 0", o.MaxInFlight))
	}
	return errors.Join(errs...)
}

// Pacer is the vegeta pacer of the loop's rate: one call every 1/Rate seconds.
func (o OpenLoop) Pacer() vegeta.ConstantPacer {
	return vegeta.ConstantPacer{Freq: 1, Per: max(time.Duration(float64(time.Second)/o.Rate), 1)}
}

// phase sends calls on the pacer's schedule for d and waits for the calls it started. With record false
// nothing is recorded (warm-up). It returns the workers' recorders, the scheduled calls that never
// started and the time from the start until the last call ended (at least d).
//
// The scheduler asks the pacer for the wait after each scheduled time, not after the moment it got
// there: the schedule stays the ideal one however late the scheduler runs, and a call's latency counts
// from its place in it.
func (o OpenLoop) phase(ctx context.Context, newCall NewCall, d time.Duration, record bool) (rs []*recorder, missed int64, elapsed time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	limit := o.MaxInFlight
	if limit == 0 {
		limit = DefaultMaxInFlight
	}
	pacer := o.Pacer()
	ticks := make(chan time.Time) // scheduled send times; unbuffered, so a send means a worker took it
	var wg sync.WaitGroup
	spawn := func() {
		var r *recorder
		if record {
			r = newRecorder()
			r.obs = o.Observer
			rs = append(rs, r)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			call := newCall()
			for due := range ticks {
				n, err := call(ctx)
				if r != nil && ctx.Err() == nil {
					r.record(time.Since(due), n, err)
				}
			}
		}()
	}

	start := time.Now()
	end := time.NewTimer(d)
	defer end.Stop()
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	var (
		at      time.Duration // the next call's place in the schedule, from start
		hits    uint64
		workers int
	)
schedule:
	for {
		step, stop := pacer.Pace(at, hits)
		at += step
		if stop || at >= d {
			break
		}
		due := start.Add(at)
		if record && o.Observer != nil {
			o.Observer.Offered(1)
		}
		if w := time.Until(due); w > 0 {
			wait.Reset(w)
			select {
			case <-wait.C:
			case <-ctx.Done():
				break schedule
			}
		}
		select {
		case ticks <- due:
			hits++
			continue
		default:
		}
		if workers < limit {
			// Not at capacity: a new worker takes the call, however late the scheduler is.
			spawn()
			workers++
			select {
			case ticks <- due:
				hits++
				continue
			case <-ctx.Done():
				break schedule
			}
		}
		select {
		case ticks <- due:
			hits++
		case <-ctx.Done():
			break schedule
		case <-end.C:
			// All MaxInFlight workers are still busy at the end: this call and the rest of the schedule
			// never start.
			missed = 1
			for {
				step, stop := pacer.Pace(at, hits+uint64(missed))
				at += step
				if stop || at >= d {
					break
				}
				missed++
			}
			break schedule
		}
	}
	close(ticks)
	wg.Wait()
	// The schedule spans d even when its last call ends early: the rate is over the whole window.
	return rs, missed, max(time.Since(start), d)
}
