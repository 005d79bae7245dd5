package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/bench/plot"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

const benchUsage = `
tunnelbench bench runs every case of the matrix twice or more: directly against the demo service and
through the tunnel, in the same run, and reports each tunneled case as a ratio to its direct pair.
It starts an in-process topology (kas and agents on loopback); nothing external is needed.

Results: OUT/summary.json (schema tunnelbench/bench/v1) and OUT/report.md.

Usage: tunnelbench bench [flags]
`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tunnelbench bench", flag.ContinueOnError)
	cli.SetUsage(fs, benchUsage)
	cfg := bench.DefaultConfig()
	out := fs.String("out", filepath.Join("results", "latest"), "directory for summary.json and report.md")
	metricsListen := fs.String("metrics-listen", "", "serve the run's metrics (tunnelbench_* and the in-process kas's tunnel_*) for Prometheus at this address, e.g. "+bench.DefaultMetricsListen+" (the dashboards' default)")
	transport := fs.String("transport", string(cfg.Transport), "how callers and agents reach kas: tcp or bufconn")
	benchFlags(fs, &cfg)
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	cfg.Transport = bench.Transport(*transport)
	plan, err := cfg.Plan()
	if err != nil {
		return cli.UsageError{Err: err}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", *out, err)
	}
	plan.Options.Progress = progressPrinter(stderr)
	if *metricsListen != "" {
		ms, err := bench.StartMetricsServer(*metricsListen)
		if err != nil {
			return cli.ListenError("metrics-listen", *metricsListen, err)
		}
		defer ms.Close()
		plan.Options.Metrics = ms
		fmt.Fprintf(stderr, "serving metrics on http://%s/metrics\n", ms.Addr())
	}
	sum, err := bench.Run(ctx, plan.Options)
	if err == nil && len(plan.ScaleSteps) > 0 {
		sum.Scale, err = bench.RunScale(ctx, bench.ScaleOptions{
			Steps:         plan.ScaleSteps,
			AgentsCommand: agentsCommand(),
			Progress:      func(s string) { fmt.Fprintln(stderr, s) },
		})
	}
	if sum != nil && (len(sum.Cases) > 0 || len(sum.Scale) > 0) {
		sum.Env.Quick = cfg.Quick
		regressions, werr := report(stdout, *out, sum, plan.Baseline, cfg.Compare)
		if werr != nil {
			return werr
		}
		if regressions > 0 && err == nil {
			err = fmt.Errorf("%d regressions beyond this run's noise (see the table above)", regressions)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; what finished is in %s", *out)
		}
		return err
	}
	return nil
}

// benchFlags defines the flags of bench.Config on fs, with cfg's values as their defaults.
func benchFlags(fs *flag.FlagSet, cfg *bench.Config) {
	fs.BoolVar(&cfg.Quick, "quick", cfg.Quick, "the headline cases only, shorter (under a minute on 2 cores)")
	fs.StringVar(&cfg.Cases, "cases", cfg.Cases, "run only cases whose name matches this regular expression (direct pairs are kept)")
	fs.StringVar(&cfg.Paths, "paths", cfg.Paths, pathsHelp())
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
	fs.Float64Var(&cfg.HTTPRate, "http-rate", cfg.HTTPRate, "requests/s of the HTTP cases (vegeta, directly and through kas's HTTP listener); 0 skips them")
	fs.StringVar(&cfg.Scale, "scale", cfg.Scale, "comma-separated agent counts for the scale case (default 1000,5000,10000; 200,1000 with --quick); none skips it")
	fs.StringVar(&cfg.Compare, "compare", cfg.Compare, "an earlier run's directory (or summary.json): print what changed and flag regressions beyond this run's noise")
}

// report writes the run's files and prints its table and, with a baseline, the comparison; it returns
// the regressions the comparison found.
func report(stdout io.Writer, dir string, sum, baseline *bench.Summary, baselineName string) (regressions int, err error) {
	files, err := write(dir, sum)
	if err != nil {
		return 0, err
	}
	fmt.Fprintln(stdout)
	if err := bench.WriteTable(stdout, sum); err != nil {
		return 0, err
	}
	if baseline != nil {
		fmt.Fprintf(stdout, "\nCompared with %s:\n", baselineName)
		c := bench.Compare(baseline, sum)
		if err := bench.WriteComparisonTable(stdout, c); err != nil {
			return 0, err
		}
		regressions = len(c.Regressions())
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join(files, ", "))
	return regressions, nil
}

// agentsCommand runs a scale step's agents in a child process of this very binary, so that the agents'
// heap is measured apart from kas's.
func agentsCommand() func(kasAddr string, count, tunnels int) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		return nil // agents then share this process
	}
	return func(kasAddr string, count, tunnels int) *exec.Cmd {
		return exec.Command(self, "scale-agents", "--kas-address", kasAddr, "--count", strconv.Itoa(count), "--tunnels", strconv.Itoa(tunnels))
	}
}

// write writes summary.json, report.md and the plots, and returns the files written.
func write(dir string, sum *bench.Summary) ([]string, error) {
	if err := sum.WriteJSON(dir); err != nil {
		return nil, err
	}
	files := []string{filepath.Join(dir, "summary.json"), filepath.Join(dir, "report.md")}
	if err := writeFile(files[1], func(w io.Writer) error { return bench.WriteMarkdown(w, sum) }); err != nil {
		return nil, err
	}
	plots, err := plot.WriteAll(filepath.Join(dir, "plots"), sum)
	if err != nil {
		// A chart that cannot be drawn costs its file, not the run's results.
		fmt.Fprintf(os.Stderr, "some plots were not written: %v\n", err)
	}
	return append(files, plots...), nil
}

// progressPrinter shows the current case, how far the run is and about how long is left.
func progressPrinter(w io.Writer) func(bench.Progress) {
	return func(p bench.Progress) {
		if p.Case == "" {
			fmt.Fprintf(w, "[%d/%d] done\n", p.Done, p.Total)
			return
		}
		width := 20
		filled := width * p.Done / max(p.Total, 1)
		fmt.Fprintf(w, "[%s%s] %d/%d %-32s ~%s left\n", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
			p.Done+1, p.Total, p.Case, p.Left.Round(time.Second))
	}
}
