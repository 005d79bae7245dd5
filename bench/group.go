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
	cases := g.Cases()
	calls := make([]load.NewCall, len(cases))
	for i, c := range cases {
		nc, err := e.caseCall(c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name(), err)
		}
		calls[i] = nc
	}
	stalls := make([]*StallResult, len(cases))
	// turn runs one turn of case i and reports whether it completed; a stall is recorded, not returned.
	turn := func(i, round int, gen load.ClosedLoop) (*load.Result, time.Duration, error) {
		c := cases[i]
		label := c.Name() + "/warmup"
		if round > 0 {
			label = fmt.Sprintf("%s/round%d", c.Name(), round)
		}
		cpu0 := processCPU()
		res, stall, err := tunnels.RunWatched(ctx, label, gen, calls[i], e.opts.Watchdog)
		cpu := processCPU() - cpu0
		if stall == nil {
			if err != nil {
				return nil, 0, fmt.Errorf("%s: %w", label, err)
			}
			return res, cpu, nil
		}
		stalls[i] = stallResult(round, stall)
		if err != nil {
			// The dump could not be written: the stall stands, without its dump.
			stalls[i].DumpPath, stalls[i].DumpError = "", err.Error()
		}
		if c.Adapter != "" {
			if err := e.adapters.restart(ctx, c.Adapter); err != nil {
				return nil, 0, fmt.Errorf("%s stalled (%s), and restarting it failed: %w", c.Name(), stalls[i].Text(), err)
			}
		}
		return nil, 0, nil
	}

	if e.opts.Warmup > 0 {
		for i := range cases {
			if _, _, err := turn(i, 0, load.ClosedLoop{Workers: g.Concurrency, Duration: e.opts.Warmup}); err != nil {
				return nil, err
			}
		}
	}
	merged := make([]*load.Result, len(cases))
	perRound := make([][]RoundResult, len(cases))
	routing := make([]*routingAcc, len(cases))
	cpu := make([]time.Duration, len(cases))
	slice := e.opts.Duration / time.Duration(e.rounds)
	for r := range e.rounds {
		for i, c := range cases {
			if stalls[i] != nil {
				continue
			}
			gen := load.ClosedLoop{Workers: g.Concurrency, Duration: slice}
			if e.opts.Metrics != nil {
				gen.Observer = e.opts.Metrics.Metrics.Observer(c.Name())
			}
			kasRouted := c.Path != PathDirect && c.Adapter == "" && len(e.topo.Gatherers) > 0
			var before routingSnapshot
			if kasRouted {
				before = snapshotRouting(e.topo.Gatherers)
			}
			res, spent, err := turn(i, r+1, gen)
			if err != nil {
				return nil, err
			}
			if res == nil {
				continue
			}
			if kasRouted {
				routing[i] = addRouting(routing[i], before, snapshotRouting(e.topo.Gatherers))
			}
			cpu[i] += spent
			perRound[i] = append(perRound[i], roundOf(res))
			if merged[i] == nil {
				merged[i] = res
			} else {
				merged[i].Add(res)
			}
		}
	}
	out := make([]*CaseResult, len(cases))
	for i, c := range cases {
		if stalls[i] != nil {
			out[i] = stalledResult(c, stalls[i])
			continue
		}
		out[i] = caseResult(c, "closed", merged[i], perRound[i], e.opts.MaxErrorRate)
		if routing[i] != nil {
			out[i].Routing = routing[i].finish()
		}
		if e.cpu && merged[i].Calls > 0 {
			out[i].CPUusPerCall = float64(cpu[i].Microseconds()) / float64(merged[i].Calls)
		}
	}
	return out, nil
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
