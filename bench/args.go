package bench

import (
	"flag"
	"io"
	"path/filepath"

	"github.com/tunnelbench/tunnelbench/internal/cli"
)

const usage = `
tunnelbench bench runs every case of the matrix twice or more: directly against the demo service and
through the tunnel, in the same run, and reports each tunneled case as a ratio to its direct pair.
It starts an in-process topology (kas and agents on loopback); nothing external is needed.

Results: OUT/summary.json (schema tunnelbench/bench/v3) and OUT/report.md; with --compare also
OUT/compare.json. Failed calls never count as throughput: a case where more calls failed than
--max-error-rate allows is marked FAILED, with its errors by code, and the run exits 1. So does a
comparison that finds a regression, or that refuses runs measured differently (machine or settings).

--tunnels all measures other reverse tunnels beside this one, on every case and against the same
direct baseline. A tunnel that stops completing calls under a case's load is reported as stalled,
with a goroutine dump in OUT/stalls/; the run goes on (a stall is a result, not a failure).

A secured deployment (--target): --kas-ca-file (or --kas-tls), --kas-server-name, --tls-cert-file and
--tls-key-file as agentk takes them, and --token-file holding a caller token of kas's
--caller-tokens-file.

Usage: tunnelbench bench [flags]
`

// DefaultOut is where tunnelbench bench writes its results without --out.
var DefaultOut = filepath.Join("results", "latest")

// StallDir is the directory, in the results directory, that receives the goroutine dumps of stalls.
const StallDir = "stalls"

// Args is tunnelbench bench's command line: the run's Config and where its results and metrics go.
type Args struct {
	Config Config
	// Out is the directory for summary.json, report.md and the plots (--out).
	Out string
	// MetricsListen serves the run's metrics for Prometheus; empty: none (--metrics-listen).
	MetricsListen string
}

// ParseArgs parses tunnelbench bench's command line and checks it; the Plan is what the run does. It
// reads no file but --compare's and starts nothing, so that a command line can be checked before it
// runs (deploy/ checks the Kubernetes Job's with it). Problems come back as one cli.UsageError; --help
// prints the usage to stdout and returns cli.ErrHelp.
func ParseArgs(args []string, stdout io.Writer) (Args, Plan, error) {
	fs := flag.NewFlagSet("tunnelbench bench", flag.ContinueOnError)
	cli.SetUsage(fs, usage)
	a := Args{Config: DefaultConfig()}
	fs.StringVar(&a.Out, "out", DefaultOut, "directory for summary.json and report.md")
	fs.StringVar(&a.MetricsListen, "metrics-listen", "", "serve the run's metrics (tunnelbench_* and the in-process kas's tunnel_*) for Prometheus at this address, e.g. "+DefaultMetricsListen+" (the dashboards' default)")
	transport := fs.String("transport", string(a.Config.Transport), "how callers and agents reach kas: tcp or bufconn")
	configFlags(fs, &a.Config)
	if err := cli.Parse(fs, args, stdout); err != nil {
		return Args{}, Plan{}, err
	}
	a.Config.Transport = Transport(*transport)
	plan, err := a.Config.Plan()
	if err != nil {
		return Args{}, Plan{}, cli.UsageError{Err: err}
	}
	plan.Options.Watchdog.DumpDir = filepath.Join(a.Out, StallDir)
	return a, plan, nil
}

// configFlags defines the flags of Config on fs, with cfg's values as their defaults.
func configFlags(fs *flag.FlagSet, cfg *Config) {
	fs.BoolVar(&cfg.Quick, "quick", cfg.Quick, "the headline cases only, shorter (under a minute on 2 cores)")
	fs.StringVar(&cfg.Cases, "cases", cfg.Cases, "run only cases whose name matches this regular expression (direct pairs are kept)")
	fs.StringVar(&cfg.Paths, "paths", cfg.Paths, PathsHelp())
	fs.StringVar(&cfg.Tunnels, "tunnels", cfg.Tunnels, TunnelsHelp())
	fs.StringVar(&cfg.Shapes, "shapes", cfg.Shapes, "comma-separated shapes such as unary-64B,unary-1MiB,server-stream-64KiB,bidi-1KiB,client-stream-1KiB,sleep")
	fs.StringVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "comma-separated concurrency levels, for example 1,16,64")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "warm-up per case (default 1s, 300ms with --quick)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "timed run per case (default 4s, 1s with --quick)")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "turns per case: the paths of a group alternate this many times so that pairs see the same noise")
	fs.BoolVar(&cfg.Processes, "processes", cfg.Processes, "run kas, agentk and the direct server as separate processes (this binary's kas, agentk and demo-server commands) instead of in this process; paths become direct, tunnel-public and tunnel-2hop (over Redis, which must be installed)")
	fs.StringVar(&cfg.Target, "target", cfg.Target, "point the load at an existing kas deployment: its public gRPC API `ADDR` (the agent must serve tunnelbench.demo.v1.Demo, as agentk does by default); nothing is started")
	fs.Int64Var(&cfg.TargetAgent, "target-agent", cfg.TargetAgent, "with --target: the agent id to call")
	fs.StringVar(&cfg.TargetDirect, "target-direct", cfg.TargetDirect, "with --target: `ADDR` of the same demo service reachable directly, for ratios (for example a tunnelbench demo-server next to the agent)")
	fs.StringVar(&cfg.TargetMetrics, "target-metrics", cfg.TargetMetrics, "with --target: a kas /metrics `URL`, for routing figures")
	// A secured target, under agentk's names for the same settings.
	sec := &cfg.TargetSecurity
	fs.BoolVar(&sec.TLS, "kas-tls", sec.TLS, "with --target: call kas over TLS, verifying it with the system roots (implied by --kas-ca-file)")
	fs.StringVar(&sec.CAFile, "kas-ca-file", sec.CAFile, "with --target: PEM CA `FILE` that verifies kas's certificate; turns TLS on")
	fs.StringVar(&sec.ServerName, "kas-server-name", sec.ServerName, "with --target: name expected in kas's certificate (default: the host of --target)")
	fs.StringVar(&sec.CertFile, "tls-cert-file", sec.CertFile, "with --target: PEM client certificate `FILE`, for a kas that asks for one")
	fs.StringVar(&sec.KeyFile, "tls-key-file", sec.KeyFile, "with --target: PEM private key `FILE` of --tls-cert-file")
	fs.StringVar(&sec.TokenFile, "token-file", sec.TokenFile, "with --target: `FILE` holding a caller token (one of kas's --caller-tokens-file), sent as a bearer token; never recorded in the results")
	fs.Float64Var(&cfg.MaxErrorRate, "max-error-rate", cfg.MaxErrorRate, "share of failed calls (0 to 1) a case tolerates; above it the case is marked FAILED and the run exits 1")
	fs.Float64Var(&cfg.HTTPRate, "http-rate", cfg.HTTPRate, "requests/s of the HTTP cases (vegeta: directly, through kas's HTTP listener, and through two plain reverse proxies, the http-proxy reference); 0 skips them")
	fs.StringVar(&cfg.Scale, "scale", cfg.Scale, "comma-separated agent counts for the scale case (default 1000,5000,10000; 200,1000 with --quick); none skips it")
	fs.StringVar(&cfg.Compare, "compare", cfg.Compare, "an earlier run's directory (or summary.json): print what changed and flag regressions beyond this run's noise")
}
