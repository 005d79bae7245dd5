package load

import (
	"context"
	"time"
)

// Tick is one call of a generator's timed run, as the generator hands it to a TickCall and to a
// ScheduleObserver.
type Tick struct {
	// N numbers the calls of a run from 0 in the order they were due; a warm-up numbers its own from 0.
	N uint64
	// Due is when the call was due: its place in an open loop's schedule, or the moment a closed
	// loop's worker started it. The call's latency counts from Due.
	Due time.Time
}

// TickCall is a Call that is told which call of the run it makes: a harness that keeps every call
// (the chaos runner) picks the call's target by its number and records its place in the schedule.
type TickCall func(ctx context.Context, t Tick) (bytes int, err error)

// NewTickCall returns the TickCall one worker uses, as NewCall does for a Call.
type NewTickCall func() TickCall

// ScheduleObserver is an Observer that also wants to know where every offered call sits in the run:
// a generator whose Observer implements it calls Scheduled wherever it calls Offered(1), including
// for the calls that end up missed. Like Observer, it must be cheap and safe for concurrent use.
type ScheduleObserver interface {
	Observer
	Scheduled(t Tick)
}

// ticked adapts a NewCall to a NewTickCall that ignores the tick.
func ticked(newCall NewCall) NewTickCall {
	return func() TickCall {
		call := newCall()
		return func(ctx context.Context, _ Tick) (int, error) { return call(ctx) }
	}
}

// offerer reports offered calls to an observer (nil: to nobody, as during a warm-up).
type offerer struct {
	obs   Observer
	sched ScheduleObserver
}

func newOfferer(obs Observer) offerer {
	s, _ := obs.(ScheduleObserver)
	return offerer{obs: obs, sched: s}
}

// offered counts one offered call.
func (o offerer) offered() {
	if o.obs != nil {
		o.obs.Offered(1)
	}
}

// scheduled tells a ScheduleObserver where that call sits.
func (o offerer) scheduled(t Tick) {
	if o.sched != nil {
		o.sched.Scheduled(t)
	}
}
