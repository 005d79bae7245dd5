package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
)

// Run defaults.
const (
	DefaultWarmup   = time.Second
	DefaultDuration = 4 * time.Second
)

// Options configure a run.
type Options struct {
	Matrix   Matrix
	Warmup   time.Duration
	Duration time.Duration
	Topology TopologyConfig
	// Progress, when set, is told about each case as it starts.
	Progress func(Progress)
}

// Progress is where a run is.
type Progress struct {
	Done, Total int
	Case        string
	Left        time.Duration
}

// Run runs the matrix on an in-process topology and returns the summary.
func Run(ctx context.Context, opts Options) (*Summary, error) {
	if opts.Warmup < 0 || opts.Duration <= 0 {
		return nil, errors.New("bench: need warm-up >= 0 and duration > 0")
	}
	groups := opts.Matrix.Groups()
	if len(groups) == 0 {
		return nil, errors.New("bench: no case matches")
	}
	started := time.Now()
	sum := &Summary{Schema: SummarySchema, Env: CollectEnv(started)}
	topo, err := StartTopology(ctx, opts.Topology)
	if err != nil {
		return nil, fmt.Errorf("start topology: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		topo.Close(cctx)
	}()

	total := 0
	for _, g := range groups {
		total += len(g.Paths)
	}
	perCase := opts.Warmup + opts.Duration
	done := 0
	for _, g := range groups {
		var direct *CaseResult
		for _, c := range g.Cases() {
			if err := ctx.Err(); err != nil {
				return sum, err
			}
			if opts.Progress != nil {
				opts.Progress(Progress{Done: done, Total: total, Case: c.Name(), Left: time.Duration(total-done) * perCase})
			}
			res, err := runCase(ctx, topo, c, opts)
			if err != nil {
				return sum, fmt.Errorf("%s: %w", c.Name(), err)
			}
			if c.Path == PathDirect {
				direct = res
			} else if direct != nil {
				res.Pair = direct.Name
				res.RatioToDirect = ratio(res, direct)
			}
			sum.Cases = append(sum.Cases, *res)
			done++
		}
	}
	if opts.Progress != nil {
		opts.Progress(Progress{Done: total, Total: total})
	}
	return sum, nil
}

func runCase(ctx context.Context, topo *Topology, c Case, opts Options) (*CaseResult, error) {
	var conn grpc.ClientConnInterface
	meta := func(ctx context.Context) context.Context { return ctx }
	switch c.Path {
	case PathDirect:
		conn = topo.Direct
	case PathTunnel, PathTunnelPublic:
		conn = topo.Tunnel(0, c.Path == PathTunnelPublic)
		md := metadata.Pairs(tunserver.RoutingAgentIDMetadataKey, "1")
		meta = func(ctx context.Context) context.Context { return metadata.NewOutgoingContext(ctx, md) }
	default:
		return nil, fmt.Errorf("path %s is not available in this topology", c.Path)
	}
	gen := load.ClosedLoop{Workers: c.Concurrency, Warmup: opts.Warmup, Duration: opts.Duration}
	before := snapshotRouting(topo.Metrics)
	res, err := gen.Run(ctx, newCall(c.Spec.Shape, c.Spec.Payload, conn, meta))
	if err != nil {
		return nil, err
	}
	cr := caseResult(c, "closed", res)
	if c.Path != PathDirect {
		cr.Routing = routingBetween(before, snapshotRouting(topo.Metrics))
	}
	return cr, nil
}

func caseResult(c Case, mode string, r *load.Result) *CaseResult {
	cr := &CaseResult{
		Name:          c.Name(),
		Path:          string(c.Path),
		Shape:         string(c.Spec.Shape),
		PayloadBytes:  c.Spec.Payload,
		Concurrency:   c.Concurrency,
		Mode:          mode,
		Calls:         r.Calls,
		Errors:        r.Errors,
		CallsPerSec:   r.CallsPerSecond(),
		BytesPerSec:   r.BytesPerSecond(),
		OfferedPerSec: r.Offered,
		AllocsPerCall: r.AllocsPerCall,
		Latency: Latency{
			P50: r.Quantile(50), P90: r.Quantile(90), P99: r.Quantile(99), P999: r.Quantile(99.9), Max: r.Latency.Max(),
		},
	}
	if r.Errors > 0 {
		cr.ErrorsByCode = map[string]int64{}
		for code, n := range r.ByCode {
			if code != 0 {
				cr.ErrorsByCode[code.String()] = n
			}
		}
	}
	return cr
}

func ratio(t, d *CaseResult) *Ratio {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	return &Ratio{
		P50:         div(float64(t.Latency.P50), float64(d.Latency.P50)),
		P99:         div(float64(t.Latency.P99), float64(d.Latency.P99)),
		CallsPerSec: div(t.CallsPerSec, d.CallsPerSec),
		BytesPerSec: div(t.BytesPerSec, d.BytesPerSec),
	}
}
