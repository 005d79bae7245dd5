package main

import (
	"context"
	"errors"
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

Results: OUT/summary.json (schema tunnelbench/bench/v2) and OUT/report.md; with --compare also
OUT/compare.json. Failed calls never count as throughput: a case where more calls failed than
--max-error-rate allows is marked FAILED, with its errors by code, and the run exits 1. So does a
comparison that finds a regression, or that refuses runs measured differently (machine or settings).

A secured deployment (--target): --kas-ca-file (or --kas-tls), --kas-server-name, --tls-cert-file and
--tls-key-file as agentk takes them, and --token-file holding a caller token of kas's
--caller-tokens-file.

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
		verdict, werr := report(stdout, *out, sum, plan.Baseline, cfg.Compare)
		if werr != nil {
			return werr
		}
		if err == nil {
			err = verdict
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
	// A secured target, under agentk's names for the same settings.
	sec := &cfg.TargetSecurity
	fs.BoolVar(&sec.TLS, "kas-tls", sec.TLS, "with --target: call kas over TLS, verifying it with the system roots (implied by --kas-ca-file)")
	fs.StringVar(&sec.CAFile, "kas-ca-file", sec.CAFile, "with --target: PEM CA `FILE` that verifies kas's certificate; turns TLS on")
	fs.StringVar(&sec.ServerName, "kas-server-name", sec.ServerName, "with --target: name expected in kas's certificate (default: the host of --target)")
	fs.StringVar(&sec.CertFile, "tls-cert-file", sec.CertFile, "with --target: PEM client certificate `FILE`, for a kas that asks for one")
	fs.StringVar(&sec.KeyFile, "tls-key-file", sec.KeyFile, "with --target: PEM private key `FILE` of --tls-cert-file")
	fs.StringVar(&sec.TokenFile, "token-file", sec.TokenFile, "with --target: `FILE` holding a caller token (one of kas's --caller-tokens-file), sent as a bearer token; never recorded in the results")
	fs.Float64Var(&cfg.MaxErrorRate, "max-error-rate", cfg.MaxErrorRate, "share of failed calls (0 to 1) a case tolerates; above it the case is marked FAILED and the run exits 1")
	fs.Float64Var(&cfg.HTTPRate, "http-rate", cfg.HTTPRate, "requests/s of the HTTP cases (vegeta, directly and through kas's HTTP listener); 0 skips them")
	fs.StringVar(&cfg.Scale, "scale", cfg.Scale, "comma-separated agent counts for the scale case (default 1000,5000,10000; 200,1000 with --quick); none skips it")
	fs.StringVar(&cfg.Compare, "compare", cfg.Compare, "an earlier run's directory (or summary.json): print what changed and flag regressions beyond this run's noise")
}

// report writes the run's files and prints its table and, with a baseline, the comparison. verdict is
// what fails the run, nil when nothing does: failed cases, regressions, a refused comparison.
func report(stdout io.Writer, dir string, sum, baseline *bench.Summary, baselineName string) (verdict, err error) {
	var c *bench.Comparison
	if baseline != nil {
		cmp := bench.Compare(baseline, sum)
		cmp.OldName, cmp.NewName = baselineName, dir
		c = &cmp
	}
	files, err := write(dir, sum)
	if err != nil {
		return nil, err
	}
	if c != nil {
		path, err := writeComparison(dir, *c)
		if err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	fmt.Fprintln(stdout)
	if err := bench.WriteTable(stdout, sum); err != nil {
		return nil, err
	}
	var problems []string
	if f := sum.Failures(); len(f) > 0 {
		problems = append(problems, failedText(sum, len(f)))
	}
	if c != nil {
		fmt.Fprintf(stdout, "\nCompared with %s:\n", baselineName)
		if err := bench.WriteComparisonTable(stdout, *c); err != nil {
			return nil, err
		}
		switch c.Verdict() {
		case bench.VerdictRefused:
			problems = append(problems, "comparison refused: the runs measured differently (see above)")
		case bench.VerdictRegressed:
			problems = append(problems, fmt.Sprintf("%d regressions beyond noise and spread (see the table above)", len(c.Regressions())))
		}
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join(files, ", "))
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; ")), nil
	}
	return nil, nil
}

// failedText counts what failed: "1 case failed (errors by code above)".
func failedText(sum *bench.Summary, failures int) string {
	cases := 0
	for _, c := range sum.Cases {
		if c.Failed {
			cases++
		}
	}
	count := func(n int, what string) string {
		if n == 1 {
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", n, what)
	}
	var parts []string
	if cases > 0 {
		parts = append(parts, count(cases, "case"))
	}
	if steps := failures - cases; steps > 0 {
		parts = append(parts, count(steps, "scale step"))
	}
	return strings.Join(parts, " and ") + " failed (errors by code above)"
}

// writeComparison adds the comparison's section to dir/report.md and writes dir/compare.json, which it
// returns.
func writeComparison(dir string, c bench.Comparison) (string, error) {
	f, err := os.OpenFile(filepath.Join(dir, "report.md"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return "", err
	}
	_, err = io.WriteString(f, "\n")
	if err == nil {
		err = bench.WriteComparisonSection(f, c)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, bench.CompareFile)
	return path, writeFile(path, func(w io.Writer) error { return bench.WriteComparisonJSON(w, c) })
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
