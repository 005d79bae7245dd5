package runner

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/chaos"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
)

// faultEvent is applying or removing one fault of the timeline at its time.
type faultEvent struct {
	at     time.Duration
	remove bool
	f      *faultState
}

// faultState follows one fault through the run.
type faultState struct {
	f       scenario.Fault
	name    string
	applied bool
	proxies []*chaos.Proxy
	window  FaultWindow
	// kill is when a fault that kills or stops something struck: from the start of its Apply to its
	// return. A kill is not an instant (a kas closes its listeners, then its connections, then its
	// tracker entries), and every call that was running at any moment of it may fail.
	kill killWindow
	// removedInLoad: the timeline removes the fault before the load ends; instant: it is never
	// removed and its act is over once applied (a kill, a restart).
	removedInLoad, instant bool
	// done is when the fault was in place (Apply returned); removed when it was removed, or -1.
	done, removed time.Duration
}

// recoveryFrom is when recovery from the fault starts to count, or false while that is not known yet
// (the fault is still to be removed).
func (s *faultState) recoveryFrom() (time.Duration, bool) {
	switch {
	case !s.applied && s.removed < 0:
		return 0, false // not applied (yet, or at all)
	case s.removedInLoad:
		return s.removed, s.removed >= 0
	}
	return s.done, true
}

// killWindow spans one kill; from < 0 when the fault kills nothing or was not applied.
type killWindow struct{ from, to time.Duration }

// faultTimeline applies and removes the scenario's faults on time, one change at a time.
type faultTimeline struct {
	sc    *scenario.Scenario
	t     testbed
	gauge *faultGauge
	start time.Time

	mu     sync.Mutex
	states []*faultState
	errs   []error
}

func newFaultTimeline(sc *scenario.Scenario, t testbed, m *harnessmetrics.Metrics, hold time.Duration) *faultTimeline {
	ft := &faultTimeline{sc: sc, t: t, gauge: newFaultGauge(m, sc.Name, hold)}
	for _, f := range sc.Faults {
		end := f.End(sc.Load.Duration)
		ft.states = append(ft.states, &faultState{
			f: f, name: f.String(), kill: killWindow{from: -1}, removed: -1,
			removedInLoad: end >= 0 && end < sc.Load.Duration,
			instant:       f.Process != nil && !(f.Process.Reversible() && f.For > 0),
		})
	}
	return ft
}

func (ft *faultTimeline) events() []faultEvent {
	var ev []faultEvent
	for _, s := range ft.states {
		ev = append(ev, faultEvent{at: s.f.At, f: s})
		if s.removedInLoad {
			ev = append(ev, faultEvent{at: s.f.End(ft.sc.Load.Duration), remove: true, f: s})
		}
	}
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].at < ev[j].at })
	return ev
}

// run plays the timeline from start until ctx ends (the load ended) or every event happened.
func (ft *faultTimeline) run(ctx context.Context, start time.Time) {
	ft.start = start
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for _, e := range ft.events() {
		if w := time.Until(start.Add(e.at)); w > 0 {
			timer.Reset(w)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		if e.remove {
			ft.remove(e.f)
		} else {
			ft.apply(e.f)
		}
	}
}

func (ft *faultTimeline) deadline(f scenario.Fault) (context.Context, context.CancelFunc) {
	d := f.Deadline
	if d <= 0 {
		d = chaos.DefaultChangeDeadline
	}
	return context.WithTimeout(context.Background(), d)
}

func (ft *faultTimeline) fail(err error) {
	ft.mu.Lock()
	ft.errs = append(ft.errs, err)
	ft.mu.Unlock()
}

func (ft *faultTimeline) labels(s *faultState) (link, fault string) {
	if s.f.Link != "" {
		return string(s.f.Link), s.f.Type
	}
	return "process", s.f.Type
}

func (ft *faultTimeline) apply(s *faultState) {
	ctx, cancel := ft.deadline(s.f)
	defer cancel()
	at := time.Since(ft.start)
	var err error
	if s.f.Network != nil {
		s.proxies, err = ft.t.linkProxies(s.f.Link, s.f.Select)
		if err == nil {
			err = chaos.Apply(ctx, s.f.Network, s.proxies)
		}
	} else {
		err = s.f.Process.Apply(ctx, ft.t, s.f.Select)
		// Calls in flight during a kill may fail (max_failed: inflight_at_kill). A graceful stop
		// drains, so only the calls running when it began count.
		var k killWindow
		switch s.f.Type {
		case "kill-kas", "kill-agents":
			k = killWindow{from: at, to: time.Since(ft.start)}
		case "stop-kas":
			k = killWindow{from: at, to: at}
		default:
			k = killWindow{from: -1}
		}
		ft.mu.Lock()
		s.kill = k
		ft.mu.Unlock()
	}
	if err != nil {
		ft.fail(fmt.Errorf("apply fault %s: %w", s.name, err))
		return
	}
	now := time.Now()
	ft.mu.Lock()
	s.applied = true
	s.done = now.Sub(ft.start)
	s.window = FaultWindow{Name: s.name, StartS: at.Seconds(), EndS: at.Seconds()}
	ft.mu.Unlock()
	link, fault := ft.labels(s)
	ft.gauge.applied(link, fault, now)
	if s.instant {
		ft.gauge.ended(link, fault, now)
	}
}

func (ft *faultTimeline) remove(s *faultState) {
	ft.mu.Lock()
	applied := s.applied
	ft.mu.Unlock()
	if !applied {
		return
	}
	ctx, cancel := ft.deadline(s.f)
	defer cancel()
	var err error
	switch {
	case s.f.Network != nil:
		err = chaos.Remove(ctx, s.f.Network, s.proxies)
	case s.f.Process.Reversible() && s.f.For > 0:
		err = s.f.Process.Remove(ctx, ft.t, s.f.Select)
	default:
		return // not undone
	}
	now := time.Now()
	at := now.Sub(ft.start)
	link, fault := ft.labels(s)
	ft.gauge.ended(link, fault, now)
	ft.mu.Lock()
	s.applied = false
	s.removed = at
	s.window.EndS = at.Seconds()
	ft.mu.Unlock()
	if err != nil {
		ft.fail(fmt.Errorf("remove fault %s: %w", s.name, err))
	}
}

// finish removes the faults still applied at the end of the load (link faults without `for`).
func (ft *faultTimeline) finish() {
	for _, s := range ft.states {
		if s.f.Network != nil {
			ft.remove(s)
		}
	}
}

// windows returns the window of every fault that was applied, with when its recovery starts to count
// (-1 while that is not known yet).
func (ft *faultTimeline) windows() []FaultWindow {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var out []FaultWindow
	for _, s := range ft.states {
		if s.window.Name != "" {
			w := s.window
			w.RecoveryFromS = -1
			if from, ok := s.recoveryFrom(); ok {
				w.RecoveryFromS = from.Seconds()
			}
			out = append(out, w)
		}
	}
	return out
}

// activeSince names the faults active now, and the instant ones that struck after since.
func (ft *faultTimeline) activeSince(since time.Duration) []string {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var out []string
	for _, s := range ft.states {
		switch {
		case s.instant && s.applied && s.done >= since:
			out = append(out, s.name+" (done)")
		case !s.instant && s.applied:
			out = append(out, s.name)
		}
	}
	return out
}

func (ft *faultTimeline) kills() []killWindow {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var out []killWindow
	for _, s := range ft.states {
		if s.kill.from >= 0 {
			out = append(out, s.kill)
		}
	}
	return out
}

func (ft *faultTimeline) errors() []error {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return append([]error(nil), ft.errs...)
}
