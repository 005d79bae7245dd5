// Package runner runs chaos scenarios: it starts the scenario's topology with a proxy on every link,
// drives its load, applies its faults on time, records what happened second by second, and checks the
// objectives and the invariants that always hold.
//
// A scenario that cannot apply or remove a fault fails with the reason; it never reports a pass it did
// not measure.
//
// With Options.Tunnel a scenario runs against another tunnel through its bench/tunnels adapter
// (adapter.go): one server, each agent's link to it through a proxy of its own, the same load,
// objectives and invariants. Scenario.CheckTunnel keeps out what only this project's tunnel has, and
// the summary names what the run left out.
package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/bench/result"
	"github.com/tunnelbench/tunnelbench/chaos"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
)

// Invariant bounds.
const (
	// DeadlineSlack is how much later than its deadline a call may end.
	DeadlineSlack = time.Second
	// goroutineSlack is how many goroutines may remain after the topology stopped (runtime timers,
	// connection pools closing in the background) without counting as a leak.
	goroutineSlack  = 20
	goroutineSettle = 15 * time.Second
)

// Options configure a run.
type Options struct {
	// Metrics, when set, records the run live (tunnelbench_* with scenario = the scenario's name).
	Metrics *harnessmetrics.Metrics
	// Attach, when set, is called with each kas's metrics while the topology runs (for a live
	// /metrics); the function it returns is called when the topology stops.
	Attach func(i int, g prometheus.Gatherer) func()
	Log    *slog.Logger
	// Progress, when set, is told what the run is doing: its steps, and every ProgressEvery while the
	// load runs, the calls offered, achieved and failed since the last line and the faults active.
	Progress func(string)
	// ProgressEvery is how often Progress hears of the load; zero means DefaultProgressEvery.
	ProgressEvery time.Duration
	// FaultHold is how long tunnelbench_fault_active stays at 1 at least after a fault was applied,
	// so that a scrape sees instant faults; zero means DefaultFaultHold. A run with Metrics waits
	// for the last hold before it returns.
	FaultHold time.Duration
	// MaxInFlight bounds an open-loop load's calls in flight; zero means DefaultMaxInFlight of the
	// scenario's load.
	MaxInFlight int
	// Tunnel, when set, runs the scenario against the bench/tunnels adapter registered under that name
	// instead of this project's topology: one server, the agents each through a proxy on its own
	// agent->kas link, callers in the server's process. The scenario must pass
	// Scenario.CheckTunnel (no kas replicas, tracker or process faults). tunnels.Reuse runs this
	// project's tunnel the same way, one kas with its caller inside; empty runs the full topology.
	Tunnel string
}

// Validate reports every problem of the options in one error.
func (o Options) Validate() error {
	var errs []error
	if o.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("runner: max in flight %d: want >= 0 (0: the scenario's DefaultMaxInFlight)", o.MaxInFlight))
	}
	if o.ProgressEvery < 0 {
		errs = append(errs, fmt.Errorf("runner: progress every %s: want >= 0 (0: DefaultProgressEvery)", o.ProgressEvery))
	}
	if o.FaultHold < 0 {
		errs = append(errs, fmt.Errorf("runner: fault hold %s: want >= 0 (0: DefaultFaultHold)", o.FaultHold))
	}
	return errors.Join(errs...)
}

// Run runs one scenario and returns its summary. The error is for runs that could not start; a
// scenario whose faults or objectives fail returns a summary with Passed false.
func Run(ctx context.Context, sc *scenario.Scenario, opts Options) (*Summary, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf(format, args...))
		}
	}
	sum := &Summary{Schema: SummarySchema, Scenario: sc.Name, File: sc.File, Description: sc.Description, Env: result.CollectEnv(time.Now())}
	if opts.Tunnel != "" {
		notApplied, err := sc.CheckTunnel(opts.Tunnel)
		if err != nil {
			return nil, err
		}
		sum.Tunnel, sum.NotApplied = opts.Tunnel, notApplied
	}
	goroutines0 := countGoroutines()
	t, err := startTestbed(ctx, sc, opts, progress)
	if err != nil {
		return nil, err
	}
	closed := false
	var closeErr error
	closeTopology := func() {
		if !closed {
			closed = true
			closeErr = t.close()
		}
	}
	defer closeTopology()
	if opts.Attach != nil {
		for i, g := range t.gatherers() {
			defer opts.Attach(i, g)()
		}
	}

	progress("%s: %s of load with %d faults", sc.Name, sc.Load.Duration, len(sc.Faults))
	m, err := runLoad(ctx, sc, t, opts)
	if err != nil {
		return nil, err
	}
	progress("%s: load done, stopping the topology", sc.Name)
	closeTopology()
	leaked := goroutineGrowth(goroutines0)
	if closeErr != nil {
		sum.Failure = closeErr.Error()
	}

	summarize(sum, sc, m.rec, m.sampler, m.ft)
	checkObjectives(sum, sc, m.rec, m.sampler, m.ft)
	checkInvariants(sum, sc, m.rec, leaked)
	sum.Passed = sum.Failure == ""
	for _, o := range sum.Objectives {
		sum.Passed = sum.Passed && o.OK
	}
	for _, err := range m.ft.errors() {
		sum.Passed = false
		if sum.Failure == "" {
			sum.Failure = err.Error()
		}
	}
	switch {
	case sum.RecoveryS != nil:
		opts.Metrics.Recovery(sc.Name, time.Duration(*sum.RecoveryS*float64(time.Second)))
	case len(sum.NotRecovered) > 0:
		opts.Metrics.NoRecovery(sc.Name)
	}
	if opts.Metrics != nil {
		m.ft.gauge.flush(ctx)
	}
	return sum, nil
}

// startTestbed starts this project's topology, or the adapter of opts.Tunnel.
func startTestbed(ctx context.Context, sc *scenario.Scenario, opts Options, progress func(string, ...any)) (testbed, error) {
	if opts.Tunnel == "" {
		progress("%s: starting %d kas and %d agents", sc.Name, sc.Topology.Kas, sc.Topology.Agents)
		return startTopology(ctx, sc, opts.Log)
	}
	progress("%s: starting tunnel %s and %d agents, a proxy on each agent's link", sc.Name, opts.Tunnel, sc.Topology.Agents)
	return startAdapter(ctx, sc, opts.Tunnel)
}

// measured is what a run's load, fault timeline and sampler recorded.
type measured struct {
	rec     *recorder
	sampler *sampler
	ft      *faultTimeline
}

// runLoad drives the load while the fault timeline plays and the sampler reads the kas every second,
// and returns once all three have stopped. The error is for a load that could not start or a run that
// was interrupted.
func runLoad(ctx context.Context, sc *scenario.Scenario, t testbed, opts Options) (measured, error) {
	gen, err := newLoadGen(sc, t, opts.Metrics, opts.MaxInFlight)
	if err != nil {
		return measured{}, err
	}
	m := measured{rec: gen.rec, ft: newFaultTimeline(sc, t, opts.Metrics, cmp.Or(opts.FaultHold, DefaultFaultHold))}
	m.sampler = newSampler(t, m.ft)
	mon := newMonitor(sc, gen.rec, m.ft, opts)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	faultsCtx, stopFaults := context.WithCancel(ctx)
	faultsDone := make(chan struct{})
	start := time.Now()
	m.sampler.start(start)
	mon.run(start)
	go func() {
		defer close(faultsDone)
		m.ft.run(faultsCtx, start)
	}()
	err = gen.run(loadCtx)
	stopFaults()
	<-faultsDone
	m.ft.finish()
	mon.stop()
	m.sampler.stop()
	if cerr := ctx.Err(); cerr != nil {
		return m, cerr
	}
	return m, err
}

// countGoroutines counts this process's goroutines, leaving out the ones toxiproxy leaves blocked for
// good on connections a toxic closed (see chaos.LeakyFunctions).
func countGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		leaky := false
		for _, f := range chaos.LeakyFunctions {
			if strings.Contains(g, f) {
				leaky = true
			}
		}
		if !leaky && strings.TrimSpace(g) != "" {
			count++
		}
	}
	return count
}

// goroutineGrowth waits for the goroutines of the stopped topology to end and returns how many more
// there are than before it started.
func goroutineGrowth(before int) int {
	deadline := time.Now().Add(goroutineSettle)
	for {
		grown := countGoroutines() - before
		if grown <= goroutineSlack || time.Now().After(deadline) {
			return grown
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func record2hist(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(d.Microseconds(), 1)
	_ = h.RecordValue(min(us, int64(5*time.Minute/time.Microsecond)))
}

// summarize fills the calls, the routing totals, the faults, the timeline and the recovery.
func summarize(sum *Summary, sc *scenario.Scenario, rec *recorder, s *sampler, ft *faultTimeline) {
	tl := summarizeCalls(sum, sc, rec)
	s.fill(tl, sum)
	sum.Faults = ft.windows()
	for i := range tl {
		for _, w := range sum.Faults {
			if w.StartS < float64(i+1) && (w.EndS > float64(i) || w.EndS == w.StartS && w.StartS >= float64(i)) {
				tl[i].ActiveFaults = append(tl[i].ActiveFaults, w.Name)
			}
		}
	}
	sum.Timeline = tl
	sum.RecoveryTolerance = RecoveryTolerance
	sum.RecoveryS, sum.NotRecovered = recoveries(tl, sum.Faults, sc.Load.Duration.Seconds())
}

// summarizeCalls fills the calls and returns the timeline's seconds with the calls offered, achieved
// and failed in each.
func summarizeCalls(sum *Summary, sc *scenario.Scenario, rec *recorder) []Second {
	sum.Calls.FailedByCode = map[string]int64{}
	sum.Calls.Missed = rec.missed
	tl := rec.counts(int(math.Ceil(sc.Load.Duration.Seconds())))
	all := load.NewHistogram()
	hists := make([]*hdrhistogram.Histogram, len(tl))
	for _, r := range rec.records {
		sum.Calls.Sent++
		record2hist(all, r.dur)
		i := int(r.end() / time.Second)
		if hists[i] == nil {
			hists[i] = load.NewHistogram()
		}
		record2hist(hists[i], r.dur)
		if r.code == codes.OK {
			sum.Calls.OK++
		} else {
			sum.Calls.FailedByCode[r.code.String()]++
		}
	}
	sum.Calls.LatencyUs = result.LatencyOf(all)
	for i := range tl {
		if hists[i] != nil {
			tl[i].LatencyUs = result.LatencyOf(hists[i])
		}
	}
	return tl
}

// inflightDuring counts the calls running at some moment of the kill.
func inflightDuring(rec *recorder, k killWindow) int64 {
	var n int64
	for _, r := range rec.records {
		if r.start <= k.to && r.end() > k.from {
			n++
		}
	}
	return n
}

func fmtFloat(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}
