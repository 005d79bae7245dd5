package runner

import (
	"context"
	"sync"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
)

// DefaultFaultHold is how long tunnelbench_fault_active stays at 1 at least, after a fault was
// applied: one scrape interval of dashboards/prometheus.yml (5 s) and a second for the scrape itself,
// so that an instant fault (a kill) or a short one is seen by a scrape, not only those that outlast
// the interval.
const DefaultFaultHold = 6 * time.Second

// faultGauge drives tunnelbench_fault_active for one scenario: a series goes to 1 when a fault with
// its labels is applied, and back to 0 when no such fault is active any more, but not before hold
// has passed since the last one was applied. Methods take the time, so that tests need no clock.
type faultGauge struct {
	m        *harnessmetrics.Metrics
	scenario string
	hold     time.Duration

	mu     sync.Mutex
	series map[faultLabels]*faultSeries
}

type faultLabels struct{ link, fault string }

type faultSeries struct {
	active int       // faults of these labels applied and not ended
	until  time.Time // the series stays at 1 at least until then
	on     bool      // the series is at 1
}

func newFaultGauge(m *harnessmetrics.Metrics, scenario string, hold time.Duration) *faultGauge {
	return &faultGauge{m: m, scenario: scenario, hold: hold, series: map[faultLabels]*faultSeries{}}
}

// applied sets the series of a fault applied at now to 1.
func (g *faultGauge) applied(link, fault string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := faultLabels{link, fault}
	s := g.series[k]
	if s == nil {
		s = &faultSeries{}
		g.series[k] = s
	}
	s.active++
	s.until = now.Add(g.hold)
	if !s.on {
		s.on = true
		g.m.Fault(g.scenario, link, fault, true)
	}
}

// ended notes that a fault ended at now (it was removed, or it was instant); its series goes to 0 now
// or, when it has not been at 1 for hold yet, at the first expire after that.
func (g *faultGauge) ended(link, fault string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.series[faultLabels{link, fault}]; s != nil && s.active > 0 {
		s.active--
	}
	g.expireLocked(now)
}

// expire sets to 0 the series whose faults ended and whose hold has passed by now.
func (g *faultGauge) expire(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked(now)
}

func (g *faultGauge) expireLocked(now time.Time) {
	for k, s := range g.series {
		if s.on && s.active == 0 && !now.Before(s.until) {
			s.on = false
			g.m.Fault(g.scenario, k.link, k.fault, false)
		}
	}
}

// pending is the latest time a series of an ended fault is held at 1 until; zero when none is.
func (g *faultGauge) pending() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	var last time.Time
	for _, s := range g.series {
		if s.on && s.active == 0 && s.until.After(last) {
			last = s.until
		}
	}
	return last
}

// flush waits until the series of ended faults have been held (at most hold, or until ctx ends) and
// then sets them to 0, so that a run's last fault is visible too and the next run starts clean.
func (g *faultGauge) flush(ctx context.Context) {
	if last := g.pending(); !last.IsZero() {
		t := time.NewTimer(min(time.Until(last), g.hold))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, s := range g.series {
		if s.on && s.active == 0 {
			s.on = false
			g.m.Fault(g.scenario, k.link, k.fault, false)
		}
	}
}
