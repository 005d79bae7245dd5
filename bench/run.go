package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/tunnelbench/tunnelbench/bench/httpproxy"
	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/bench/result"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
)

// Run defaults.
const (
	DefaultWarmup   = time.Second
	DefaultDuration = 4 * time.Second
	// DefaultRounds: the paths of a group take turns, this many times each, so that a tunneled case and
	// its direct pair see the same machine noise.
	DefaultRounds = 4
)

// Options configure a run. Validate checks them; Config.Plan builds them from tunnelbench bench's flags.
type Options struct {
	Matrix Matrix
	// Warmup (>= 0) and Duration (> 0) of each case.
	Warmup   time.Duration
	Duration time.Duration
	// Rounds splits each case's duration into turns taken in rotation with the other paths of its group;
	// at most MaxRounds, zero means one.
	Rounds   int
	Topology TopologyConfig
	// Progress, when set, is told about each case as it starts.
	Progress func(Progress)
	// Metrics, when set, serves the run live: the harness's series by case, and the topology's kas.
	Metrics *MetricsServer
	// AgentID is the agent tunneled cases call; zero means 1, the topology's first agent.
	AgentID int64
	// HTTPRate, when positive, adds the HTTP cases: vegeta at this rate (requests/s, at most
	// MaxHTTPRate) against the same upstream directly and through kas's HTTP listener.
	HTTPRate float64
	// MaxErrorRate is the share of failed calls (0 to 1) a case tolerates; a case above it, or one
	// where no call finished, is marked failed (DefaultMaxErrorRate: none tolerated).
	MaxErrorRate float64
	// Quick is recorded in the summary: the run is the --quick one.
	Quick bool
	// IdleAgents, when positive, measures the idle cost of every tunnel the run measures (the direct
	// baseline included) with this many agents, before the load (tunnels.DefaultIdleAgents in
	// tunnelbench bench); zero skips it. Only an in-process topology measures it.
	IdleAgents int
	// IdleCommand, when set, measures each idle cost in a child process of its own (RunIdleCost), so
	// that the run's process and what the tunnel leaves behind stay apart; nil measures in this process.
	IdleCommand func(tunnel string, agents int) *exec.Cmd
	// Watchdog watches every closed-loop turn: a tunnel that stops completing calls makes its case
	// stalled, with a goroutine dump in Watchdog.DumpDir, and the run goes on (zero: its defaults).
	Watchdog tunnels.Watchdog
}

// DefaultHTTPRate is the rate of the HTTP cases.
const DefaultHTTPRate = 500

// HTTP case paths. http-proxy is the HTTP reference, no tunnel: the upstream behind two plain reverse
// proxies (bench/httpproxy), as many connections as http-tunnel crosses, so that its ratio is what those
// crossings cost by themselves on the machine, in the same run.
const (
	PathHTTPDirect Path = "http-direct"
	PathHTTPTunnel Path = "http-tunnel"
	PathHTTPProxy  Path = "http-proxy"
)

// Validate reports every problem of the options in one error; each names the tunnelbench bench flag
// that sets what is wrong.
func (o Options) Validate() error {
	errs := o.problems()
	if len(errs) == 0 {
		errs = append(errs, o.matchProblem())
	}
	return errors.Join(errs...)
}

// problems are what is wrong with the options, the matrix's cases left aside.
func (o Options) problems() []error {
	var errs []error
	for _, n := range o.Matrix.Concurrency {
		if n < 1 || n > MaxConcurrency {
			errs = append(errs, fmt.Errorf("--concurrency: %d is not between 1 and %d", n, MaxConcurrency))
		}
	}
	if o.Warmup < 0 {
		errs = append(errs, fmt.Errorf("--warmup %v must not be negative", o.Warmup))
	}
	if o.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--duration %v must be positive", o.Duration))
	}
	if o.Rounds < 0 || o.Rounds > MaxRounds {
		errs = append(errs, roundsError(o.Rounds))
	}
	if !(o.MaxErrorRate >= 0 && o.MaxErrorRate <= 1) {
		errs = append(errs, fmt.Errorf("--max-error-rate must be between 0 and 1 (a share of the calls), got %v", o.MaxErrorRate))
	}
	if o.HTTPRate < 0 || o.HTTPRate > MaxHTTPRate {
		errs = append(errs, fmt.Errorf("--http-rate must be between 0 and 1e6, got %v", o.HTTPRate))
	}
	if t := o.Topology.Transport; t != "" && t != TransportTCP && t != TransportBufconn {
		errs = append(errs, fmt.Errorf("--transport %q: want tcp or bufconn", t))
	}
	if o.Topology.Target != "" && o.Topology.Processes {
		errs = append(errs, errors.New("--target and --processes exclude each other"))
	}
	if o.Topology.Target == "" && !o.Topology.TargetSecurity.IsZero() {
		errs = append(errs, errTargetSecurity)
	}
	if o.IdleAgents < 0 || o.IdleAgents > tunnels.MaxAgents {
		errs = append(errs, fmt.Errorf("idle agents must be between 0 and %d, got %d", tunnels.MaxAgents, o.IdleAgents))
	}
	if o.Watchdog.StallAfter < 0 || o.Watchdog.AbandonAfter < 0 {
		errs = append(errs, fmt.Errorf("the stall watchdog's bounds must not be negative, got %v and %v", o.Watchdog.StallAfter, o.Watchdog.AbandonAfter))
	}
	if err := o.adapterProblem(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// adapterProblem says why the matrix's adapters cannot run, or nil: each must be registered, and they
// run in this process, beside an in-process topology.
func (o Options) adapterProblem() error {
	if len(o.Matrix.Adapters) == 0 {
		return nil
	}
	var errs []error
	for _, a := range o.Matrix.Adapters {
		if _, err := tunnels.Lookup(a); err != nil {
			errs = append(errs, fmt.Errorf("--tunnels: %w", err))
		}
	}
	if o.Topology.Target != "" || o.Topology.Processes {
		errs = append(errs, fmt.Errorf("--tunnels %s: these tunnels run in this process, beside the in-process topology: not with --target or --processes",
			strings.Join(o.Matrix.Adapters, ",")))
	}
	return errors.Join(errs...)
}

func roundsError(n int) error {
	return fmt.Errorf("--rounds must be between 1 and %d, got %d", MaxRounds, n)
}

// matchProblem says that the matrix has no case, or nil.
func (o Options) matchProblem() error {
	if len(o.Matrix.Groups()) > 0 {
		return nil
	}
	cases := ""
	if o.Matrix.Filter != nil {
		cases = o.Matrix.Filter.String()
	}
	return fmt.Errorf("no case matches --cases %q", cases)
}

// addGroup adds a group's results to sum, each tunneled case paired with the group's direct one.
func addGroup(sum *Summary, results []*CaseResult) {
	var direct *CaseResult
	for _, res := range results {
		if res.Path == string(PathDirect) {
			direct = res
		} else if direct != nil {
			pair(res, direct)
		}
		sum.Cases = append(sum.Cases, *res)
	}
}

// Run runs the matrix on an in-process topology and returns the summary.
func Run(ctx context.Context, opts Options) (*Summary, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	groups := opts.Matrix.Groups()
	sum := newSummary(opts)
	defer func() { sum.Env.LoadAvgEnd = result.LoadAverage() }()
	withHTTP := opts.HTTPRate > 0 && (opts.Matrix.Filter == nil || opts.Matrix.Filter.MatchString(httpCaseName(opts.HTTPRate, PathHTTPTunnel)))
	progress := newProgressReporter(opts, caseCount(groups, withHTTP))

	// Stall dumps of an earlier run into the same directory would read as this run's.
	if err := tunnels.ClearDumps(opts.Watchdog.DumpDir); err != nil {
		return nil, fmt.Errorf("bench: clear old stall dumps: %w", err)
	}
	var err error
	if sum.Tunnels, err = describeTunnels(groups); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	// Idle costs first, while the process holds nothing else.
	if opts.IdleAgents > 0 && opts.inProcess() {
		if err := measureIdle(ctx, sum.Tunnels, opts, func(name string) { progress.at(0, "idle cost of "+name) }); err != nil {
			return sum, err
		}
	}

	opts.Topology = opts.topologyConfig()
	topo, err := StartTopology(ctx, opts.Topology)
	if err != nil {
		return sum, fmt.Errorf("start topology: %w", err)
	}
	defer closeTopology(topo)
	sum.Settings = opts.settings(topo.cfg)
	if opts.Metrics != nil {
		for i, g := range topo.Gatherers {
			defer opts.Metrics.Attach("kas", fmt.Sprint(i), g)()
		}
	}
	adapters, err := startAdapters(ctx, opts.Matrix.Adapters, topo.cfg.MaxMessageSize)
	if err != nil {
		return sum, err
	}
	defer adapters.close()
	defer func() { adapters.recordRestarts(sum.Tunnels) }()

	env := &groupEnv{topo: topo, adapters: adapters, opts: opts, rounds: max(opts.Rounds, 1), cpu: opts.inProcess()}
	return sum, env.runAll(ctx, sum, groups, withHTTP, progress)
}

// newSummary is a run's summary before any case: its schema and the machine it runs on.
func newSummary(opts Options) *Summary {
	sum := &Summary{Schema: SummarySchema, Env: result.CollectEnv(time.Now())}
	sum.Env.Quick, sum.Env.Target = opts.Quick, opts.Topology.Target
	return sum
}

// inProcess says that the topology runs in this process, so that its CPU time and idle cost are the
// tunnels'.
func (o Options) inProcess() bool {
	return o.Topology.Target == "" && !o.Topology.Processes
}

// topologyConfig is the topology the matrix needs: the single-use agent and as many kas as its paths ask
// for, at least.
func (o Options) topologyConfig() TopologyConfig {
	t := o.Topology
	t.SingleUseAgent = t.SingleUseAgent || o.Matrix.NeedsSingleUseAgent()
	if t.Kas < o.Matrix.NeedsKas() {
		t.Kas = o.Matrix.NeedsKas()
	}
	return t
}

// closeTopology stops the topology within a bound of its own: the run's context may be over already.
func closeTopology(topo *Topology) {
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topo.Close(cctx)
}

// runAll runs every group, then the HTTP cases when asked and served, adding their results to sum.
func (e *groupEnv) runAll(ctx context.Context, sum *Summary, groups []Group, withHTTP bool, progress progressReporter) error {
	done := 0
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		progress.at(done, groupName(g))
		results, err := e.run(ctx, g)
		if err != nil {
			return err
		}
		addGroup(sum, results)
		done += len(g.Paths) + len(g.Adapters)
	}
	if withHTTP && e.topo.HTTPTunnel != "" {
		progress.at(done, httpCaseName(e.opts.HTTPRate, "*"))
		cases, err := runHTTPGroup(ctx, e.topo, e.opts, e.rounds)
		if err != nil {
			return err
		}
		sum.Cases = append(sum.Cases, cases...)
	}
	progress.finished()
	return nil
}

func groupName(g Group) string {
	return fmt.Sprintf("%s/c%d", g.Spec, g.Concurrency)
}

// pair makes direct the tunneled case c's pair: its ratios, over the whole case and round by round.
// A stalled case, or a stalled pair, has no ratio: no figures to divide.
func pair(c, direct *CaseResult) {
	c.Pair = direct.Name
	if c.Stalled() || direct.Stalled() {
		return
	}
	c.RatioToDirect = ratio(c, direct)
	c.RatioSpread = ratioSpread(c.Rounds, direct.Rounds)
}

// caseResult is a case's figures from its merged result and its rounds; failed calls count as calls and
// errors, never as throughput (load.Result's rates count successful calls only).
func caseResult(c Case, mode string, r *load.Result, rounds []RoundResult, maxErrorRate float64) *CaseResult {
	cr := &CaseResult{
		Name:          c.Name(),
		Path:          string(c.Path),
		Tunnel:        c.Tunnel(),
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
		Latency:       result.LatencyOf(r.Latency),
		Failed:        tooManyErrors(r.Calls, r.Errors, maxErrorRate),
	}
	if len(rounds) > 1 {
		cr.Rounds, cr.Spread = rounds, spreadOf(rounds)
	}
	// Without it (never seen: encoding fails only on a corrupt histogram) merge names this case.
	cr.LatencyHDR, _ = result.EncodeHistogram(r.Latency)
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

func httpCaseName(rate float64, path Path) string {
	return fmt.Sprintf("http-get-%s/r%.0f/%s", FormatBytes(HTTPPayload), rate, path)
}

// runHTTPGroup fetches the upstream's payload at a fixed rate, directly, through the tunnel and through the
// reference's proxies (started for the group), in turns.
func runHTTPGroup(ctx context.Context, topo *Topology, opts Options, rounds int) ([]CaseResult, error) {
	proxies, err := httpproxy.Start(topo.HTTPUpstream)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", httpCaseName(opts.HTTPRate, PathHTTPProxy), err)
	}
	defer func() { _ = proxies.Close() }()
	targets := []struct {
		path Path
		url  string
	}{
		{PathHTTPDirect, topo.HTTPUpstream + "/payload"},
		{PathHTTPTunnel, topo.HTTPTunnel + "/agents/1/payload"},
		{PathHTTPProxy, proxies.URL + "/payload"},
	}
	merged := make([]*load.Result, len(targets))
	perRound := make([][]RoundResult, len(targets))
	for r := range rounds {
		for i, tg := range targets {
			gen := load.HTTP{Target: vegeta.Target{Method: "GET", URL: tg.url}, Rate: opts.HTTPRate, Duration: opts.Duration / time.Duration(rounds)}
			if r == 0 {
				gen.Warmup = opts.Warmup
			}
			res, err := gen.Run(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", httpCaseName(opts.HTTPRate, tg.path), err)
			}
			perRound[i] = append(perRound[i], roundOf(res))
			if merged[i] == nil {
				merged[i] = res
			} else {
				merged[i].Add(res)
			}
		}
	}
	out := make([]CaseResult, len(targets))
	for i, tg := range targets {
		c := Case{Spec: ShapeSpec{Shape: "http-get", Payload: HTTPPayload}, Path: tg.path}
		cr := caseResult(c, "open", merged[i], perRound[i], opts.MaxErrorRate)
		cr.Name = httpCaseName(opts.HTTPRate, tg.path)
		out[i] = *cr
	}
	for i := range out[1:] {
		pair(&out[1+i], &out[0])
	}
	return out, nil
}
