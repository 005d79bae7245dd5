package runner

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
)

// DefaultMaxInFlight is the bound on a scenario's open-loop calls in flight when Options.MaxInFlight is
// zero: as many calls as the rate starts while one call may last (its timeout plus DeadlineSlack).
// Calls that keep their deadline never reach it, so the load is paced as if it had no bound; calls
// that outlive their deadline make later calls start late, and the calls still due when the load
// ends with every worker busy are counted as missed.
func DefaultMaxInFlight(l scenario.Workload) int {
	n := math.Ceil(l.Rate*(l.CallTimeout+DeadlineSlack).Seconds()) + 1
	return int(min(n, math.MaxInt32))
}

// record is one call: when it was due and started, how long it took, how it ended.
type record struct {
	due   time.Duration // since the load started: its place in the schedule
	start time.Duration
	dur   time.Duration // from due (open loop) or start (closed loop) to the end
	code  codes.Code
	agent int64
}

func (r record) end() time.Duration { return r.due + r.dur }

// recorder collects every call of a run; the load is small enough (hundreds of calls per second for a
// minute) to keep them all. It also counts them per second as they come, so that the run's figures
// can be followed while it goes on.
type recorder struct {
	mu      sync.Mutex
	records []record
	// offered are the places in the schedule of every call the load meant to send, missed ones included.
	offered []time.Duration
	// missed counts the calls of an open loop's schedule that never started: every worker was busy.
	missed int64
	// seconds counts offered, achieved and failed calls per second since the load started (the call
	// counts of the timeline).
	seconds []Second
}

// second returns the counts of second i, growing the timeline to it. r.mu must be held.
func (r *recorder) second(i int) *Second {
	for len(r.seconds) <= i {
		r.seconds = append(r.seconds, Second{T: len(r.seconds)})
	}
	return &r.seconds[i]
}

func (r *recorder) add(rec record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	end := r.second(int(rec.end() / time.Second))
	if rec.code == codes.OK {
		end.Achieved++
		end.OK++
		return
	}
	end.Failed++
	if end.ByCode == nil {
		end.ByCode = map[string]int64{}
	}
	end.ByCode[rec.code.String()]++
	r.second(int(max(rec.due, 0)/time.Second)).OfferedFailed++
}

func (r *recorder) offer(due time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.offered = append(r.offered, due)
	r.second(int(max(due, 0)/time.Second)).Offered++
}

// counts returns a copy of the per-second counts, at least n seconds long.
func (r *recorder) counts(n int) []Second {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > 0 {
		r.second(n - 1)
	}
	out := make([]Second, len(r.seconds))
	for i, sec := range r.seconds {
		out[i] = sec
		if sec.ByCode != nil {
			out[i].ByCode = maps.Clone(sec.ByCode)
		}
	}
	return out
}

// since returns the calls that finished after the first n, and how many calls were offered.
func (r *recorder) since(n int) (finished []record, offered int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records[min(n, len(r.records)):]), len(r.offered)
}

type agentKey struct{}

// agentMeta routes a call to the agent its context names.
func agentMeta(ctx context.Context) context.Context {
	id, _ := ctx.Value(agentKey{}).(int64)
	return metadata.AppendToOutgoingContext(ctx, rpc.RoutingAgentIDMetadataKey, strconv.FormatInt(id, 10))
}

// loadGen drives the scenario's load with bench/load's generators, as bench drives its cases: an open
// loop at the scenario's rate or a closed loop of its workers. Call n enters at the chosen kas (the
// testbed's entry) and goes to target agent n mod the targets.
type loadGen struct {
	sc      *scenario.Scenario
	rec     *recorder
	obs     load.Observer
	targets []int64
	// calls[i] is the call factory of entry i (kas i's caller->kas proxy).
	calls []load.NewCall
	// alive lists the kas callers can enter at now.
	alive       func() []int
	maxInFlight int
	start       time.Time
}

func newLoadGen(sc *scenario.Scenario, t testbed, m *harnessmetrics.Metrics, maxInFlight int) (*loadGen, error) {
	shape, err := load.ParseShape(sc.Load.Shape)
	if err != nil {
		return nil, err
	}
	g := &loadGen{
		sc: sc, rec: &recorder{}, obs: m.Observer(sc.Name), targets: sc.Load.TargetAgents(sc.Topology),
		alive: t.aliveKas, maxInFlight: cmp.Or(maxInFlight, DefaultMaxInFlight(sc.Load)),
	}
	g.calls = t.newCalls(shape, sc.Load.Payload)
	return g, nil
}

// entry picks the kas a call enters at: the scenario's, or the next live one.
func (g *loadGen) entry(n uint64) int {
	if g.sc.Load.Entry != scenario.EntryAll {
		return g.sc.Load.Entry
	}
	alive := g.alive()
	if len(alive) == 0 {
		return 0
	}
	return alive[int(n%uint64(len(alive)))]
}

// run sends the load for its duration and returns once every call it started has ended. The error is
// for a load that could not start.
func (g *loadGen) run(ctx context.Context) error {
	g.start = time.Now()
	obs := loadObserver{Observer: g.obs, rec: g.rec, start: g.start}
	l := g.sc.Load
	var (
		res *load.Result
		err error
	)
	if l.Rate > 0 {
		res, err = load.OpenLoop{Rate: l.Rate, Duration: l.Duration, MaxInFlight: g.maxInFlight, Observer: obs}.RunTicks(ctx, g.newCall)
	} else {
		res, err = load.ClosedLoop{Workers: l.Workers, Duration: l.Duration, Observer: obs}.RunTicks(ctx, g.newCall)
	}
	if err != nil {
		return err
	}
	g.rec.mu.Lock()
	g.rec.missed = res.Missed
	g.rec.mu.Unlock()
	return nil
}

// newCall is one worker's call. An open loop takes a new call from its entry kas's factory for every
// call; a closed-loop worker keeps one per entry kas.
func (g *loadGen) newCall() load.TickCall {
	kept := map[int]load.Call{}
	return func(ctx context.Context, t load.Tick) (int, error) {
		// The call starts before it chooses its kas: one that chose a kas just before a kill marked it
		// dead then started before the kill ended, and counts as in flight at the kill
		// (inflight_at_kill), however late its goroutine runs on.
		started := time.Since(g.start)
		e := g.entry(t.N)
		call := kept[e]
		if call == nil {
			call = g.calls[e]()
			if g.sc.Load.Rate == 0 {
				kept[e] = call
			}
		}
		return g.one(ctx, call, t, started)
	}
}

// one makes the call of tick t, started at started (since the load's start), within the scenario's
// call timeout, and records it.
func (g *loadGen) one(ctx context.Context, call load.Call, t load.Tick, started time.Duration) (int, error) {
	agent := g.targets[int(t.N%uint64(len(g.targets)))]
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, agentKey{}, agent), g.sc.Load.CallTimeout)
	n, err := call(cctx)
	cancel()
	if ctx.Err() != nil {
		return n, err // the run was interrupted: this call has no outcome to record
	}
	end := time.Since(g.start)
	due := t.Due.Sub(g.start)
	g.rec.add(record{due: due, start: started, dur: end - due, code: status.Code(err), agent: agent})
	return n, err
}

// loadObserver feeds the calls to the harness metrics, as bench does, and keeps each offered call's
// place in the schedule.
type loadObserver struct {
	load.Observer
	rec   *recorder
	start time.Time
}

// Scheduled implements load.ScheduleObserver.
func (o loadObserver) Scheduled(t load.Tick) { o.rec.offer(t.Due.Sub(o.start)) }
