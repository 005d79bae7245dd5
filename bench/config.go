package bench

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/tunnels"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// Quick run defaults (Config.Quick, tunnelbench bench --quick): the headline cases only, in under a
// minute on 2 cores.
const (
	QuickWarmup   = 300 * time.Millisecond
	QuickDuration = time.Second
)

// QuickScaleSteps are the agent counts of the quick run's scale case.
var QuickScaleSteps = []int{200, 1000}

// Limits of what a run may ask for.
const (
	MaxRounds      = 100
	MaxConcurrency = 10000
	MaxHTTPRate    = 1e6
	MaxScaleAgents = 10000
)

// ScaleNone, as Config.Scale, skips the scale case.
const ScaleNone = "none"

// Config is a bench run as tunnelbench bench's flags describe it, one field per flag: lists are
// comma-separated and a zero Warmup, Duration or Scale means the default. Plan checks it, fills in the
// defaults and returns what to run; its error names every flag that is wrong.
type Config struct {
	// Quick runs QuickMatrix for QuickWarmup and QuickDuration per case, and QuickScaleSteps (--quick).
	Quick bool
	// Cases keeps only cases whose name matches this regular expression (--cases).
	Cases string
	// Paths, Shapes and Concurrency replace the matrix's axes (--paths, --shapes, --concurrency).
	Paths, Shapes, Concurrency string
	// Tunnels lists the tunnels to measure side by side (--tunnels): "all", or bench/tunnels names
	// separated by commas; empty means this project's modes (tunnels.Default). See Config.tunnels.
	Tunnels string
	// Warmup and Duration per case (--warmup, --duration): zero means DefaultWarmup and DefaultDuration.
	Warmup, Duration time.Duration
	// Rounds per case, 1 to MaxRounds (--rounds).
	Rounds int
	// Transport of the in-process topology (--transport).
	Transport Transport
	// Processes runs the topology as separate processes (--processes).
	Processes bool
	// Target, TargetDirect, TargetMetrics and TargetAgent point the load at a deployment (--target,
	// --target-direct, --target-metrics, --target-agent).
	Target, TargetDirect, TargetMetrics string
	TargetAgent                         int64
	// TargetSecurity is how to reach a secured Target (--kas-tls, --kas-ca-file, --kas-server-name,
	// --tls-cert-file, --tls-key-file, --token-file): agentk's flags for the same things.
	TargetSecurity TargetSecurity
	// MaxErrorRate is the share of failed calls a case tolerates, 0 to 1 (--max-error-rate).
	MaxErrorRate float64
	// HTTPRate of the HTTP cases, 0 to MaxHTTPRate; 0 skips them (--http-rate).
	HTTPRate float64
	// Scale lists the scale case's agent counts (--scale): empty means DefaultScaleSteps (QuickScaleSteps
	// with Quick), ScaleNone skips it.
	Scale string
	// Compare is an earlier run's directory or summary.json to compare with (--compare).
	Compare string
}

// DefaultConfig is the configuration of tunnelbench bench without flags.
func DefaultConfig() Config {
	return Config{Rounds: DefaultRounds, Transport: TransportTCP, TargetAgent: 1, HTTPRate: DefaultHTTPRate, MaxErrorRate: DefaultMaxErrorRate}
}

// Plan is a checked Config: what a bench run does.
type Plan struct {
	// Options of the matrix run.
	Options Options
	// ScaleSteps are the agent counts of the scale case; none skips it.
	ScaleSteps []int
	// Baseline is the earlier run to compare with; nil for none.
	Baseline *Summary
}

// Plan checks the configuration and returns the run it describes, or one error naming every flag that
// is wrong.
func (c Config) Plan() (Plan, error) {
	var errs []error
	opts := Options{
		Matrix:   DefaultMatrix(),
		Warmup:   cmpDuration(c.Warmup, DefaultWarmup),
		Duration: cmpDuration(c.Duration, DefaultDuration),
		Rounds:   c.Rounds,
		Topology: TopologyConfig{Transport: c.Transport, Processes: c.Processes},
		HTTPRate: c.HTTPRate,
		// A negative or NaN rate stays, for Options to report.
		MaxErrorRate: c.MaxErrorRate,
		Quick:        c.Quick,
	}
	steps := DefaultScaleSteps
	if c.Quick {
		opts.Matrix = QuickMatrix()
		opts.Warmup, opts.Duration = cmpDuration(c.Warmup, QuickWarmup), cmpDuration(c.Duration, QuickDuration)
		steps = QuickScaleSteps
	}
	errs = append(errs, c.matrix(&opts.Matrix)...)
	if c.Rounds == 0 {
		// Options take no rounds for one; the flag wants a number (Options check the others).
		errs = append(errs, roundsError(c.Rounds))
	}
	steps, scaleErrs := c.scaleSteps(steps)
	errs = append(errs, scaleErrs...)
	var baseline *Summary
	if c.Compare != "" {
		var err error
		if baseline, err = ReadSummary(c.Compare); err != nil {
			errs = append(errs, fmt.Errorf("--compare: %w", err))
		}
	}
	if c.Processes && c.Paths == "" {
		opts.Matrix.Paths = []Path{PathDirect, PathTunnelPublic, PathTunnel2Hop}
	}
	errs = append(errs, opts.problems()...)
	if c.Target != "" {
		if c.Processes {
			errs = append(errs, errors.New("--target and --processes exclude each other"))
		}
		c.target(&opts)
		steps = nil
		if _, err := c.TargetSecurity.dialOptions(); err != nil {
			errs = append(errs, err)
		}
	} else if !c.TargetSecurity.IsZero() {
		errs = append(errs, errTargetSecurity)
	}
	errs = append(errs, c.tunnels(&opts)...)
	if err := opts.adapterProblem(); err != nil {
		errs = append(errs, err)
	}
	if c.Target == "" && !c.Processes {
		opts.IdleAgents = tunnels.DefaultIdleAgents
	}
	if len(errs) == 0 {
		errs = append(errs, opts.matchProblem())
	}
	if err := errors.Join(errs...); err != nil {
		return Plan{}, err
	}
	return Plan{Options: opts, ScaleSteps: steps, Baseline: baseline}, nil
}

// cmpDuration is d, or def when d is zero; a negative d stays, for Options.Validate to report.
func cmpDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// matrix replaces m's axes and filter with those the configuration sets.
func (c Config) matrix(m *Matrix) []error {
	var errs, e []error
	if c.Paths != "" {
		m.Paths, e = parseList("--paths", c.Paths, ParsePath)
		errs = append(errs, e...)
	}
	if c.Shapes != "" {
		m.Shapes, e = parseList("--shapes", c.Shapes, ParseShapeSpec)
		errs = append(errs, e...)
	}
	if c.Concurrency != "" {
		m.Concurrency, e = parseList("--concurrency", c.Concurrency, func(s string) (int, error) {
			n, err := strconv.Atoi(s)
			if err != nil {
				return 0, fmt.Errorf("%q is not a number between 1 and %d", s, MaxConcurrency)
			}
			return n, nil // Options.Validate checks the range
		})
		errs = append(errs, e...)
	}
	if c.Cases != "" {
		re, err := regexp.Compile(c.Cases)
		if err != nil {
			errs = append(errs, fmt.Errorf("--cases: %w", err))
		}
		m.Filter = re
	}
	return errs
}

// tunnels narrows the run to the tunnels that Tunnels lists. This project's tunnel is measured on the
// matrix's paths (tunnel, tunnel-public, tunnel-2hop and the HTTP cases; tunnel-single-use for its
// single-use mode), so a path stays when its tunnel is listed; every other tunnel listed (a peer, or
// yours) becomes an adapter of the matrix, measured with the caller in its server's process, as the
// tunnel path is. The direct baseline always stays. A path given with --paths whose tunnel is not
// listed is a contradiction. The references (grpc-proxy) are listed by default, as adapters.
func (c Config) tunnels(opts *Options) []error {
	m := &opts.Matrix
	list := tunnels.Default()
	if c.Target != "" || c.Processes {
		// The references run in this process, beside an in-process topology: by default a run against
		// a deployment or processes goes without them (asked for by name, they are refused).
		list = slices.DeleteFunc(list, func(name string) bool { return !isPathTunnel(name) })
	}
	if c.Tunnels != "" {
		var err error
		if list, err = tunnels.ParseList(c.Tunnels); err != nil {
			return []error{fmt.Errorf("--tunnels: %w", err)}
		}
	}
	var errs []error
	var paths []Path
	for _, p := range m.Paths {
		if p == PathDirect || slices.Contains(list, PathTunnelName(p)) {
			paths = append(paths, p)
		} else if c.Paths != "" {
			errs = append(errs, fmt.Errorf("--paths %s measures the tunnel %s, which --tunnels does not list", p, PathTunnelName(p)))
		}
	}
	m.Paths = paths
	if !slices.Contains(list, tunnels.Reuse) {
		opts.HTTPRate = 0
	}
	m.Adapters = nil
	for _, name := range list {
		if !isPathTunnel(name) {
			m.Adapters = append(m.Adapters, name)
		}
	}
	return errs
}

// isPathTunnel says whether a tunnel is measured on the matrix's paths rather than through its adapter.
func isPathTunnel(name string) bool {
	return name == tunnels.Direct || name == tunnels.Reuse || name == tunnels.SingleUse
}

// scaleSteps are the agent counts Scale lists, or def when it lists none.
func (c Config) scaleSteps(def []int) ([]int, []error) {
	switch c.Scale {
	case "":
		return def, nil
	case ScaleNone:
		return nil, nil
	}
	return parseList("--scale", c.Scale, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxScaleAgents {
			return 0, fmt.Errorf("%q is not an agent count between 1 and %d", s, MaxScaleAgents)
		}
		return n, nil
	})
}

// parseList parses each item of a comma-separated flag value; each item that does not parse is a
// problem naming the flag.
func parseList[T any](flag, list string, parse func(string) (T, error)) ([]T, []error) {
	var (
		out  []T
		errs []error
	)
	for _, s := range cli.SplitList(list) {
		v, err := parse(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", flag, err))
			continue
		}
		out = append(out, v)
	}
	return out, errs
}

// target points opts at the deployment the configuration names: its public API and, when given, the
// direct service; no HTTP cases.
func (c Config) target(opts *Options) {
	opts.Topology.Target, opts.Topology.TargetDirect, opts.Topology.TargetMetrics = c.Target, c.TargetDirect, c.TargetMetrics
	opts.Topology.TargetSecurity = c.TargetSecurity
	opts.AgentID = c.TargetAgent
	if c.Paths == "" {
		opts.Matrix.Paths = []Path{PathDirect, PathTunnelPublic}
	}
	opts.Matrix.NoDirect = c.TargetDirect == ""
	opts.HTTPRate = 0
}
