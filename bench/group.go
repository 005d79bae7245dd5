package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// groupEnv is what every group of a run shares.
type groupEnv struct {
	topo     *Topology
	adapters *adapterSet
	opts     Options
	rounds   int
	// cpu says that caller, tunnel and agent all run in this process, so that its CPU time is theirs.
	cpu bool
}

// run runs a group's cases in turns: warm-up for each, then rounds × (each case for its share of the
// duration), so that pairs share the machine's conditions. Every turn is watched: a case whose tunnel
// stops completing calls is stalled, sits out its remaining rounds, and its adapter is started anew for
// the next group; the others go on.
func (e *groupEnv) run(ctx context.Context, g Group) ([]*CaseResult, error) {
	gr, err := e.newGroupRun(g)
	if err != nil {
		return nil, err
	}
	if err := gr.warmUp(ctx); err != nil {
		return nil, err
	}
	for r := range e.rounds {
		if err := gr.round(ctx, r+1); err != nil {
			return nil, err
		}
	}
	return gr.results(), nil
}

// groupRun is one group's run under way: its cases and, case by case, what their turns gathered.
type groupRun struct {
	*groupEnv
	g        Group
	cases    []Case
	calls    []load.NewCall
	stalls   []*StallResult
	merged   []*load.Result
	perRound [][]RoundResult
	routing  []*routingAcc
	// spent is each case's process CPU time over its rounds.
	spent []time.Duration
}

// newGroupRun makes every case's call factory first, so that a case that cannot run fails the group
// before any load.
func (e *groupEnv) newGroupRun(g Group) (*groupRun, error) {
	cases := g.Cases()
	calls := make([]load.NewCall, len(cases))
	for i, c := range cases {
		nc, err := e.caseCall(c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name(), err)
		}
		calls[i] = nc
	}
	n := len(cases)
	return &groupRun{groupEnv: e, g: g, cases: cases, calls: calls, stalls: make([]*StallResult, n),
		merged: make([]*load.Result, n), perRound: make([][]RoundResult, n), routing: make([]*routingAcc, n),
		spent: make([]time.Duration, n)}, nil
}

// warmUp runs each case once for the warm-up, its figures dropped.
func (gr *groupRun) warmUp(ctx context.Context) error {
	if gr.opts.Warmup <= 0 {
		return nil
	}
	for i := range gr.cases {
		if _, _, err := gr.turn(ctx, i, 0, load.ClosedLoop{Workers: gr.g.Concurrency, Duration: gr.opts.Warmup}); err != nil {
			return err
		}
	}
	return nil
}

// round runs one turn of every case not stalled yet, each for its share of the duration, and keeps
// its figures.
func (gr *groupRun) round(ctx context.Context, round int) error {
	slice := gr.opts.Duration / time.Duration(gr.rounds)
	for i, c := range gr.cases {
		if gr.stalls[i] != nil {
			continue
		}
		gen := load.ClosedLoop{Workers: gr.g.Concurrency, Duration: slice}
		if gr.opts.Metrics != nil {
			gen.Observer = gr.opts.Metrics.Metrics.Observer(c.Name())
		}
		// Only calls routed by this process's kas show in its gatherers' routing figures.
		kasRouted := c.Path != PathDirect && c.Adapter == "" && len(gr.topo.Gatherers) > 0
		var before routingSnapshot
		if kasRouted {
			before = snapshotRouting(gr.topo.Gatherers)
		}
		res, spent, err := gr.turn(ctx, i, round, gen)
		if err != nil {
			return err
		}
		if res == nil {
			continue
		}
		if kasRouted {
			gr.routing[i] = addRouting(gr.routing[i], before, snapshotRouting(gr.topo.Gatherers))
		}
		gr.keep(i, res, spent)
	}
	return nil
}

// keep adds one round's result of case i to the case's figures.
func (gr *groupRun) keep(i int, res *load.Result, spent time.Duration) {
	gr.spent[i] += spent
	gr.perRound[i] = append(gr.perRound[i], roundOf(res))
	if gr.merged[i] == nil {
		gr.merged[i] = res
	} else {
		gr.merged[i].Add(res)
	}
}

// turn runs one turn of case i (round 0 is the warm-up) and returns its result and the process CPU time
// it took; a stall is recorded in stalls, not returned, and gives a nil result.
func (gr *groupRun) turn(ctx context.Context, i, round int, gen load.ClosedLoop) (*load.Result, time.Duration, error) {
	c := gr.cases[i]
	label := c.Name() + "/warmup"
	if round > 0 {
		label = fmt.Sprintf("%s/round%d", c.Name(), round)
	}
	cpu0 := processCPU()
	res, stall, err := tunnels.RunWatched(ctx, label, gen, gr.calls[i], gr.opts.Watchdog)
	cpu := processCPU() - cpu0
	if stall == nil {
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", label, err)
		}
		return res, cpu, nil
	}
	gr.stalls[i] = stallResult(round, stall)
	if err != nil {
		// The dump could not be written: the stall stands, without its dump.
		gr.stalls[i].DumpPath, gr.stalls[i].DumpError = "", err.Error()
	}
	if c.Adapter != "" {
		if err := gr.adapters.restart(ctx, c.Adapter); err != nil {
			return nil, 0, fmt.Errorf("%s stalled (%s), and restarting it failed: %w", c.Name(), gr.stalls[i].Text(), err)
		}
	}
	return nil, 0, nil
}

// results are the group's case results: figures for the cases that ran, the stall for those that did not.
func (gr *groupRun) results() []*CaseResult {
	out := make([]*CaseResult, len(gr.cases))
	for i, c := range gr.cases {
		if gr.stalls[i] != nil {
			out[i] = stalledResult(c, gr.stalls[i])
			continue
		}
		out[i] = caseResult(c, "closed", gr.merged[i], gr.perRound[i], gr.opts.MaxErrorRate)
		if gr.routing[i] != nil {
			out[i].Routing = gr.routing[i].finish()
		}
		if gr.cpu && gr.merged[i].Calls > 0 {
			out[i].CPUusPerCall = float64(gr.spent[i].Microseconds()) / float64(gr.merged[i].Calls)
		}
	}
	return out
}

// stalledResult is a stalled case: what it is and its stall, no figures.
func stalledResult(c Case, s *StallResult) *CaseResult {
	return &CaseResult{Name: c.Name(), Path: string(c.Path), Tunnel: c.Tunnel(), Shape: string(c.Spec.Shape), PayloadBytes: c.Spec.Payload,
		Concurrency: c.Concurrency, Mode: "closed", Stall: s}
}

// caseCall is the call factory of a case: its shape on its path, or through its adapter.
func (e *groupEnv) caseCall(c Case) (load.NewCall, error) {
	noMeta := func(ctx context.Context) context.Context { return ctx }
	if c.Adapter != "" {
		conn, err := e.adapters.conn(c.Adapter)
		if err != nil {
			return nil, err
		}
		return load.NewShapeCall(c.Spec.Shape, c.Spec.Payload, conn, noMeta), nil
	}
	switch c.Path {
	case PathDirect:
		return load.NewShapeCall(c.Spec.Shape, c.Spec.Payload, e.topo.Direct, noMeta), nil
	case PathTunnel, PathTunnelPublic, PathTunnel2Hop, PathTunnelSingleUse:
		agentID := max(e.opts.AgentID, 1)
		if c.Path == PathTunnelSingleUse {
			agentID = e.topo.SingleUseAgentID()
		}
		md := metadata.Pairs(rpc.RoutingAgentIDMetadataKey, strconv.FormatInt(agentID, 10))
		meta := func(ctx context.Context) context.Context { return metadata.NewOutgoingContext(ctx, md) }
		conn, err := e.topo.PathConn(c.Path)
		if err != nil {
			return nil, err
		}
		return load.NewShapeCall(c.Spec.Shape, c.Spec.Payload, conn, meta), nil
	default:
		return nil, fmt.Errorf("path %s is not available in this topology", c.Path)
	}
}
