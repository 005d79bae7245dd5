package runner

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
)

// DefaultProgressEvery is how often a run tells its progress while the load runs.
const DefaultProgressEvery = 5 * time.Second

// monitor follows a run while its load goes on, once a second: it ends the holds of the fault
// gauges, keeps the live recovery figure, and every progressEvery says what the load offered,
// achieved and lost since it last said so, and which faults are active.
type monitor struct {
	sc       *scenario.Scenario
	rec      *recorder
	ft       *faultTimeline
	metrics  *harnessmetrics.Metrics
	progress func(string)
	every    time.Duration

	start        time.Time
	lastProgress time.Duration
	seen         int // records already told
	offered      int // calls offered when last told

	stopCh, done chan struct{}
}

func newMonitor(sc *scenario.Scenario, rec *recorder, ft *faultTimeline, opts Options) *monitor {
	return &monitor{
		sc: sc, rec: rec, ft: ft, metrics: opts.Metrics, progress: opts.Progress,
		every: cmp.Or(opts.ProgressEvery, DefaultProgressEvery), stopCh: make(chan struct{}), done: make(chan struct{}),
	}
}

func (m *monitor) run(start time.Time) {
	m.start = start
	go func() {
		defer close(m.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case now := <-tick.C:
				m.tick(now)
			case <-m.stopCh:
				return
			}
		}
	}()
}

func (m *monitor) stop() {
	close(m.stopCh)
	<-m.done
}

func (m *monitor) tick(now time.Time) {
	m.ft.gauge.expire(now)
	elapsed := now.Sub(m.start)
	if m.metrics != nil {
		m.liveRecovery(elapsed)
	}
	if m.progress != nil && elapsed-m.lastProgress >= m.every-time.Second/2 {
		m.progress(m.line(elapsed))
		m.lastProgress = elapsed
	}
}

// liveRecovery sets the recovery figure from the seconds so far: the longest recovery over the
// faults whose recovery has started to count and whose first second is over, or none while one of
// them has not caught up.
func (m *monitor) liveRecovery(elapsed time.Duration) {
	// Only whole seconds that are over count; the load's end bounds them as it bounds the final figure.
	end := min(math.Floor(elapsed.Seconds()), m.sc.Load.Duration.Seconds())
	windows := m.ft.windows()
	measurable := false
	for i, w := range windows {
		if w.RecoveryFromS >= 0 && math.Floor(w.RecoveryFromS)+1 > end {
			windows[i].RecoveryFromS = -1 // its first second is not over yet
		}
		measurable = measurable || windows[i].RecoveryFromS >= 0
	}
	if !measurable {
		return
	}
	r, notRecovered := recoveries(m.rec.counts(0), windows, end)
	if r == nil || len(notRecovered) > 0 {
		m.metrics.NoRecovery(m.sc.Name)
		return
	}
	m.metrics.Recovery(m.sc.Name, time.Duration(*r*float64(time.Second)))
}

// line is one progress line: "kas-kill 15s/40s: offered 300/s, achieved 298/s, failed 12 in 5s
// (Unavailable 12), faults: 10s kill-kas (kas [1]) (done)".
func (m *monitor) line(elapsed time.Duration) string {
	finished, offered := m.rec.since(m.seen)
	m.seen += len(finished)
	span := (elapsed - m.lastProgress).Seconds()
	var ok, failed int
	byCode := map[string]int64{}
	for _, r := range finished {
		if r.code == codes.OK {
			ok++
		} else {
			failed++
			byCode[r.code.String()]++
		}
	}
	newOffered := offered - m.offered
	m.offered = offered
	faults := m.ft.activeSince(m.lastProgress)
	active := "none"
	if len(faults) > 0 {
		active = strings.Join(faults, ", ")
	}
	// Calls are offered only while the load runs; they finish until the last one in flight did.
	d := m.sc.Load.Duration
	offeredSpan := (min(elapsed, d) - min(m.lastProgress, d)).Seconds()
	at := fmt.Sprintf("%s/%s", elapsed.Round(time.Second), d)
	if elapsed-d >= time.Second/2 {
		at = fmt.Sprintf("%s/%s+%s for calls in flight", d, d, (elapsed - d).Round(time.Second))
	}
	return fmt.Sprintf("%s %s: offered %s/s, achieved %s/s, failed %d in %s%s; faults: %s",
		m.sc.Name, at, perSecond(newOffered, offeredSpan), perSecond(ok, span),
		failed, time.Duration(span*float64(time.Second)).Round(time.Second), reportCodesInline(byCode), active)
}

func perSecond(n int, span float64) string {
	if span <= 0 {
		return "0" // nothing could be offered: the load was over
	}
	return fmt.Sprintf("%.0f", float64(n)/span)
}
