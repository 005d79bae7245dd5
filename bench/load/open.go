package load

import (
	"cmp"
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
	// Observer, when set, sees every call the timed run's schedule asks for (offered, the missed ones
	// included) and every timed call; a ScheduleObserver also sees each offered call's Tick.
	Observer Observer
}

// Run implements Generator.
func (o OpenLoop) Run(ctx context.Context, newCall NewCall) (*Result, error) {
	return o.RunTicks(ctx, ticked(newCall))
}

// RunTicks is Run for calls that are told their Tick: each call's number in the run and when it was
// due.
func (o OpenLoop) RunTicks(ctx context.Context, newCall NewTickCall) (*Result, error) {
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
func (o OpenLoop) phase(ctx context.Context, newCall NewTickCall, d time.Duration, record bool) (rs []*recorder, missed int64, elapsed time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &openPhase{
		ctx:     ctx,
		newCall: newCall,
		limit:   cmp.Or(o.MaxInFlight, DefaultMaxInFlight),
		ticks:   make(chan Tick), // unbuffered, so a send means a worker took it
		start:   time.Now(),
	}
	if record {
		p.record, p.obs = true, o.Observer
	}
	p.offer = newOfferer(p.obs)
	missed = p.schedule(o.Pacer(), d)
	close(p.ticks)
	p.wg.Wait()
	// The schedule spans d even when its last call ends early: the rate is over the whole window.
	return p.rs, missed, max(time.Since(p.start), d)
}

// openPhase is one phase of an open loop: the scheduler's state and the workers it started.
type openPhase struct {
	ctx     context.Context
	newCall NewTickCall
	limit   int
	ticks   chan Tick
	start   time.Time
	// record is false during a warm-up, which records nothing; obs sees the timed calls.
	record bool
	obs    Observer
	offer  offerer

	wg      sync.WaitGroup
	workers int
	rs      []*recorder
}

// sent says what became of a due call.
type sent int

const (
	sentToWorker sent = iota
	sentCancelled
	// sentTooLate: every worker was still busy when the phase ended.
	sentTooLate
)

// schedule sends calls on the pacer's schedule until d and returns how many it could not start.
//
// The scheduler asks the pacer for the wait after each scheduled time, not after the moment it got
// there: the schedule stays the ideal one however late the scheduler runs, and a call's latency counts
// from its place in it.
func (p *openPhase) schedule(pacer vegeta.ConstantPacer, d time.Duration) (missed int64) {
	end := time.NewTimer(d)
	defer end.Stop()
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	var at time.Duration // the next call's place in the schedule, from start
	for hits := uint64(0); ; hits++ {
		step, stop := pacer.Pace(at, hits)
		at += step
		if stop || at >= d {
			return 0
		}
		t := Tick{N: hits, Due: p.start.Add(at)}
		p.offer.offered()
		p.offer.scheduled(t)
		if w := time.Until(t.Due); w > 0 {
			wait.Reset(w)
			select {
			case <-wait.C:
			case <-p.ctx.Done():
				return 0
			}
		}
		switch p.send(t, end.C) {
		case sentCancelled:
			return 0
		case sentTooLate:
			// All MaxInFlight workers are still busy at the end: this call and the rest of the schedule
			// never start.
			return p.miss(pacer, at, hits, d)
		}
	}
}

// send hands t to an idle worker, or to a new one while there are fewer than the limit, or else waits
// for a worker to be free, the phase to end or the run to be cancelled.
func (p *openPhase) send(t Tick, end <-chan time.Time) sent {
	select {
	case p.ticks <- t:
		return sentToWorker
	default:
	}
	if p.workers < p.limit {
		// Not at capacity: a new worker takes the call, however late the scheduler is.
		p.spawn()
		end = nil // a new worker is about to take the call: only a cancelled run stops it
	}
	select {
	case p.ticks <- t:
		return sentToWorker
	case <-p.ctx.Done():
		return sentCancelled
	case <-end:
		return sentTooLate
	}
}

// miss counts the call due at at (number hits) and every later one of the schedule as missed, and
// offers the later ones as the scheduler would have.
func (p *openPhase) miss(pacer vegeta.ConstantPacer, at time.Duration, hits uint64, d time.Duration) int64 {
	missed := int64(1)
	for {
		step, stop := pacer.Pace(at, hits+uint64(missed))
		at += step
		if stop || at >= d {
			return missed
		}
		p.offer.offered()
		p.offer.scheduled(Tick{N: hits + uint64(missed), Due: p.start.Add(at)})
		missed++
	}
}

// spawn starts a worker with its own call; a recording phase gives it its own recorder.
func (p *openPhase) spawn() {
	p.workers++
	var r *recorder
	if p.record {
		r = newRecorder()
		r.obs = p.obs
		p.rs = append(p.rs, r)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		call := p.newCall()
		for t := range p.ticks {
			n, err := call(p.ctx, t)
			if r != nil && p.ctx.Err() == nil {
				r.record(time.Since(t.Due), n, err)
			}
		}
	}()
}
