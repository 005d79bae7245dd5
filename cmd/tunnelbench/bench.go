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
	"regexp"
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
	out := fs.String("out", filepath.Join("results", "latest"), "directory for summary.json and report.md")
	quick := fs.Bool("quick", false, "the headline cases only, shorter (under a minute on 2 cores)")
	cases := fs.String("cases", "", "run only cases whose name matches this regular expression (direct pairs are kept)")
	paths := fs.String("paths", "", "comma-separated paths (direct, tunnel, tunnel-public); default all")
	shapes := fs.String("shapes", "", "comma-separated shapes such as unary-64B,unary-1MiB,server-stream-64KiB,bidi-1KiB,client-stream-1KiB,sleep")
	conc := fs.String("concurrency", "", "comma-separated concurrency levels, for example 1,16,64")
	warmup := fs.Duration("warmup", 0, "warm-up per case (default 1s, 300ms with --quick)")
	duration := fs.Duration("duration", 0, "timed run per case (default 4s, 1s with --quick)")
	rounds := fs.Int("rounds", bench.DefaultRounds, "turns per case: the paths of a group alternate this many times so that pairs see the same noise")
	transport := fs.String("transport", string(bench.TransportTCP), "how callers and agents reach kas: tcp or bufconn")
	processes := fs.Bool("processes", false, "run kas, agentk and the direct server as separate processes (this binary's kas, agentk and demo-server commands) instead of in this process; paths become direct, tunnel-public and tunnel-2hop (over Redis, which must be installed)")
	target := fs.String("target", "", "point the load at an existing kas deployment: its public gRPC API `ADDR` (the agent must serve tunnelbench.demo.v1.Demo, as agentk does by default); nothing is started")
	targetAgent := fs.Int64("target-agent", 1, "with --target: the agent id to call")
	targetDirect := fs.String("target-direct", "", "with --target: `ADDR` of the same demo service reachable directly, for ratios (for example a tunnelbench demo-server next to the agent)")
	targetMetrics := fs.String("target-metrics", "", "with --target: a kas /metrics `URL`, for routing figures")
	httpRate := fs.Float64("http-rate", bench.DefaultHTTPRate, "requests/s of the HTTP cases (vegeta, directly and through kas's HTTP listener); 0 skips them")
	scale := fs.String("scale", "", "comma-separated agent counts for the scale case (default 1000,5000,10000; 200,1000 with --quick); none skips it")
	metricsListen := fs.String("metrics-listen", "", "serve the run's metrics (tunnelbench_* and the in-process kas's tunnel_*) for Prometheus at this address, e.g. "+bench.DefaultMetricsListen+" (the dashboards' default)")
	compare := fs.String("compare", "", "an earlier run's directory (or summary.json): print what changed and flag regressions beyond this run's noise")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	opts := bench.Options{
		Matrix:   bench.DefaultMatrix(),
		Warmup:   bench.DefaultWarmup,
		Duration: bench.DefaultDuration,
		Rounds:   bench.DefaultRounds,
		Topology: bench.TopologyConfig{Transport: bench.Transport(*transport)},
	}
	if *quick {
		opts.Matrix = bench.QuickMatrix()
		opts.Warmup, opts.Duration = 300*time.Millisecond, time.Second
	}
	var errs []error
	if *paths != "" {
		opts.Matrix.Paths = nil
		for _, s := range split(*paths) {
			p, err := bench.ParsePath(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("--paths: %w", err))
				continue
			}
			opts.Matrix.Paths = append(opts.Matrix.Paths, p)
		}
	}
	if *shapes != "" {
		opts.Matrix.Shapes = nil
		for _, s := range split(*shapes) {
			sp, err := bench.ParseShapeSpec(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("--shapes: %w", err))
				continue
			}
			opts.Matrix.Shapes = append(opts.Matrix.Shapes, sp)
		}
	}
	if *conc != "" {
		opts.Matrix.Concurrency = nil
		for _, s := range split(*conc) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 10000 {
				errs = append(errs, fmt.Errorf("--concurrency: %q is not a number between 1 and 10000", s))
				continue
			}
			opts.Matrix.Concurrency = append(opts.Matrix.Concurrency, n)
		}
	}
	if *cases != "" {
		re, err := regexp.Compile(*cases)
		if err != nil {
			errs = append(errs, fmt.Errorf("--cases: %w", err))
		}
		opts.Matrix.Filter = re
	}
	if *warmup > 0 {
		opts.Warmup = *warmup
	}
	if *duration > 0 {
		opts.Duration = *duration
	}
	if *rounds < 1 || *rounds > 100 {
		errs = append(errs, fmt.Errorf("--rounds must be between 1 and 100, got %d", *rounds))
	}
	opts.Rounds = *rounds
	if *httpRate < 0 || *httpRate > 1e6 {
		errs = append(errs, fmt.Errorf("--http-rate must be between 0 and 1e6, got %v", *httpRate))
	}
	opts.HTTPRate = *httpRate
	if *warmup < 0 || *duration < 0 {
		errs = append(errs, errors.New("--warmup and --duration must not be negative"))
	}
	if t := bench.Transport(*transport); t != bench.TransportTCP && t != bench.TransportBufconn {
		errs = append(errs, fmt.Errorf("--transport %q: want tcp or bufconn", *transport))
	}
	scaleSteps := bench.DefaultScaleSteps
	if *quick {
		scaleSteps = []int{200, 1000}
	}
	switch *scale {
	case "":
	case "none":
		scaleSteps = nil
	default:
		scaleSteps = nil
		for _, s := range split(*scale) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 9000 && n != 10000 && n > 10000 {
				errs = append(errs, fmt.Errorf("--scale: %q is not an agent count between 1 and 10000", s))
				continue
			}
			scaleSteps = append(scaleSteps, n)
		}
	}
	var old *bench.Summary
	if *compare != "" {
		var err error
		if old, err = bench.ReadSummary(*compare); err != nil {
			errs = append(errs, fmt.Errorf("--compare: %w", err))
		}
	}
	opts.Topology.Processes = *processes
	if *processes && *paths == "" {
		opts.Matrix.Paths = []bench.Path{bench.PathDirect, bench.PathTunnelPublic, bench.PathTunnel2Hop}
	}
	if *target != "" {
		if *processes {
			errs = append(errs, errors.New("--target and --processes exclude each other"))
		}
		opts.Topology.Target, opts.Topology.TargetDirect, opts.Topology.TargetMetrics = *target, *targetDirect, *targetMetrics
		opts.AgentID = *targetAgent
		if *paths == "" {
			opts.Matrix.Paths = []bench.Path{bench.PathDirect, bench.PathTunnelPublic}
		}
		opts.Matrix.NoDirect = *targetDirect == ""
		opts.HTTPRate = 0
		scaleSteps = nil
	}
	if len(errs) > 0 {
		return cli.UsageError{Err: errors.Join(errs...)}
	}
	if len(opts.Matrix.Groups()) == 0 {
		return cli.Usagef("no case matches --cases %q", *cases)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", *out, err)
	}
	opts.Progress = progressPrinter(stderr)
	if *metricsListen != "" {
		ms, err := bench.StartMetricsServer(*metricsListen)
		if err != nil {
			return err
		}
		defer ms.Close()
		opts.Metrics = ms
		fmt.Fprintf(stderr, "serving metrics on http://%s/metrics\n", ms.Addr())
	}
	sum, err := bench.Run(ctx, opts)
	if err == nil && len(scaleSteps) > 0 {
		sum.Scale, err = bench.RunScale(ctx, bench.ScaleOptions{
			Steps:         scaleSteps,
			AgentsCommand: agentsCommand(),
			Progress:      func(s string) { fmt.Fprintln(stderr, s) },
		})
	}
	if sum != nil && (len(sum.Cases) > 0 || len(sum.Scale) > 0) {
		sum.Env.Quick = *quick
		files, werr := write(*out, sum)
		if werr != nil {
			return werr
		}
		fmt.Fprintln(stdout)
		if terr := bench.WriteTable(stdout, sum); terr != nil {
			return terr
		}
		if old != nil {
			fmt.Fprintf(stdout, "\nCompared with %s:\n", *compare)
			c := bench.Compare(old, sum)
			if terr := bench.WriteComparisonTable(stdout, c); terr != nil {
				return terr
			}
			if n := len(c.Regressions()); n > 0 && err == nil {
				err = fmt.Errorf("%d regressions beyond this run's noise (see the table above)", n)
			}
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join(files, ", "))
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; what finished is in %s", *out)
		}
		return err
	}
	return nil
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

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
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
