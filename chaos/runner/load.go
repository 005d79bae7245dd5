package runner

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

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
// minute) to keep them all.
type recorder struct {
	mu      sync.Mutex
	records []record
	offered []time.Duration
}

func (r *recorder) add(rec record) {
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
}

func (r *recorder) offer(due time.Duration) {
	r.mu.Lock()
	r.offered = append(r.offered, due)
	r.mu.Unlock()
}

type agentKey struct{}

// loadGen drives the scenario's load: calls enter at the chosen kas and go to the target agents in turn.
type loadGen struct {
	sc      *scenario.Scenario
	t       *topology
	rec     *recorder
	metrics *harnessmetrics.Metrics
	targets []int64
	next    atomic.Uint64
	// calls[i] is the call factory through kas i's caller->kas proxy.
	calls []load.NewCall
	start time.Time
}

func newLoadGen(sc *scenario.Scenario, t *topology, m *harnessmetrics.Metrics) (*loadGen, error) {
	shape, err := bench.ParseShape(sc.Load.Shape)
	if err != nil {
		return nil, err
	}
	g := &loadGen{sc: sc, t: t, rec: &recorder{}, metrics: m, targets: sc.Load.TargetAgents(sc.Topology)}
	meta := func(ctx context.Context) context.Context {
		id, _ := ctx.Value(agentKey{}).(int64)
		return metadata.AppendToOutgoingContext(ctx, rpc.RoutingAgentIDMetadataKey, strconv.FormatInt(id, 10))
	}
	for _, c := range t.callers {
		g.calls = append(g.calls, bench.NewShapeCall(shape, sc.Load.Payload, c, meta))
	}
	return g, nil
}

// entry picks the kas a call enters at: the scenario's, or the next live one.
func (g *loadGen) entry(n uint64) int {
	if g.sc.Load.Entry != scenario.EntryAll {
		return g.sc.Load.Entry
	}
	alive := g.t.aliveKas()
	if len(alive) == 0 {
		return 0
	}
	return alive[int(n)%len(alive)]
}

// one makes call number n, due at due, and records it.
func (g *loadGen) one(ctx context.Context, call load.Call, n uint64, due time.Duration) {
	agent := g.targets[int(n)%len(g.targets)]
	started := time.Since(g.start)
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, agentKey{}, agent), g.sc.Load.CallTimeout)
	_, err := call(cctx)
	cancel()
	if ctx.Err() != nil {
		return // the run was interrupted: this call has no outcome to record
	}
	end := time.Since(g.start)
	code := status.Code(err)
	g.rec.add(record{due: due, start: started, dur: end - due, code: code, agent: agent})
	g.metrics.Call(g.sc.Name, end-due, code)
}

// run sends the load for its duration and returns once every call it started has ended.
func (g *loadGen) run(ctx context.Context) {
	g.start = time.Now()
	var wg sync.WaitGroup
	if g.sc.Load.Rate > 0 {
		g.openLoop(ctx, &wg)
	} else {
		g.closedLoop(ctx, &wg)
	}
	wg.Wait()
}

// openLoop starts each call at its scheduled time on its own goroutine, however many are in flight:
// latency counts from the schedule, so nothing is hidden, and call timeouts bound the goroutines.
func (g *loadGen) openLoop(ctx context.Context, wg *sync.WaitGroup) {
	pacer := vegeta.ConstantPacer{Freq: 1, Per: max(time.Duration(float64(time.Second)/g.sc.Load.Rate), 1)}
	timer := time.NewTimer(0)
	defer timer.Stop()
	var at time.Duration
	for hits := uint64(0); ; hits++ {
		step, stop := pacer.Pace(at, hits)
		at += step
		if stop || at >= g.sc.Load.Duration {
			return
		}
		if w := time.Until(g.start.Add(at)); w > 0 {
			timer.Reset(w)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		n := g.next.Add(1) - 1
		g.rec.offer(at)
		g.metrics.Offered(g.sc.Name, 1)
		call := g.calls[g.entry(n)]()
		wg.Add(1)
		go func(due time.Duration) {
			defer wg.Done()
			g.one(ctx, call, n, due)
		}(at)
	}
}

// closedLoop runs the scenario's workers back to back.
func (g *loadGen) closedLoop(ctx context.Context, wg *sync.WaitGroup) {
	end := g.start.Add(g.sc.Load.Duration)
	for w := range g.sc.Load.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			calls := make(map[int]load.Call)
			for ctx.Err() == nil && time.Now().Before(end) {
				n := g.next.Add(1) - 1
				e := g.entry(n)
				if calls[e] == nil {
					calls[e] = g.calls[e]()
				}
				due := time.Since(g.start)
				g.rec.offer(due)
				g.metrics.Offered(g.sc.Name, 1)
				g.one(ctx, calls[e], n, due)
			}
			_ = w
		}()
	}
}
