package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
	"github.com/tunnelbench/tunnelbench/chaos/runner"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// errObjectivesFailed makes the process exit 1: the tunnel did not hold.
var errObjectivesFailed = errors.New("the tunnel did not meet every objective")

const scenarioUsage = `
tunnelbench scenario run executes one scenario file: it starts the scenario's topology in this process
with a fault proxy on every link, sends its load, applies its faults on time and checks its objectives.
While the load runs it prints a line every 5 s: calls offered, achieved (succeeded) and failed by code,
and the faults active. A scenario that bounds no failures (success_ratio, max_failed, zero_failed)
allows none; recovery is "not recovered" when calls never caught up after a fault (the rule is in
chaos/scenario/doc.go).

With --tunnel NAME (a tunnel of bench --tunnels: openconfig-grpctunnel, jhump-grpctunnel, ...), the
scenario runs against that tunnel instead: its server and the scenario's agents, each agent's link to
the server through a fault proxy of its own, callers in the server's process. The agent->kas link
faults mean the same there; faults on kas, agentk or Redis, the other links, several kas, a Redis
tracker and max_connection_age are this project's only, and such a scenario exits 2 naming them.
--tunnel tunnel (the default) is this project's full topology.

Results: OUT/summary.json (schema tunnelbench/scenario/v1), OUT/report.md and OUT/plots/*.svg.
Exit status: 0 when every objective held, 1 when one failed (failed calls beyond what the scenario
allows included), 2 when the file is not a valid scenario or not one for --tunnel.

Usage: tunnelbench scenario run FILE [--out DIR] [--metrics-listen ADDR] [--tunnel NAME]
`

const chaosUsage = `
tunnelbench chaos runs every scenario file of a directory (scenarios/ by default), one after the other,
and writes each one's results to OUT/<name>/ and a table of all of them to OUT/README.md. OUT defaults
to results/chaos-latest; results/chaos holds the committed reference run.
Exit status: 0 when every scenario held, 1 when one failed, 2 when a file is not a valid scenario.

Usage: tunnelbench chaos [--dir DIR] [--out DIR] [--only NAME,...]
`

func runScenarioCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tunnelbench scenario run", flag.ContinueOnError)
	cli.SetUsage(fs, scenarioUsage)
	out := fs.String("out", "", "directory for the results (default results/scenarios/<name>, with --tunnel results/scenarios/<name>-<tunnel>)")
	metricsListen := fs.String("metrics-listen", "", "serve the run's metrics for Prometheus at this address, e.g. "+bench.DefaultMetricsListen)
	tunnel := fs.String("tunnel", tunnels.Reuse, "run against this tunnel ("+strings.Join(tunnels.Names(), ", ")+"); "+tunnels.Reuse+": this project's full topology")
	if len(args) == 0 || args[0] != "run" {
		if len(args) > 0 && (args[0] == "help" || strings.HasPrefix(args[0], "-")) {
			// scenario --help, help, --version: as scenario run answers them.
			first := args[0]
			if first == "help" {
				first = "--help"
			}
			if err := cli.Parse(fs, []string{first}, stdout); err != nil {
				return err
			}
		}
		return cli.UsageError{Err: errors.New("want: tunnelbench scenario run FILE"), Command: fs.Name()}
	}
	pos, err := cli.ParsePositional(fs, args[1:], stdout, 1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cli.UsageError{Err: errors.New("missing the scenario FILE"), Command: fs.Name()}
	}
	file := pos[0]
	if err := cli.CheckFile("scenario file", file); err != nil {
		return cli.UsageError{Err: err, Command: fs.Name()}
	}
	sc, err := scenario.Load(file)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	opts, err := tunnelOptions(fs.Name(), *tunnel, sc)
	if err != nil {
		return err
	}
	dir := *out
	switch {
	case dir == "" && opts.Tunnel != "":
		dir = filepath.Join("results", "scenarios", sc.Name+"-"+opts.Tunnel)
	case dir == "":
		dir = filepath.Join("results", "scenarios", sc.Name)
	}
	ms, err := startMetrics(*metricsListen, stderr)
	if err != nil {
		return err
	}
	if ms != nil {
		defer ms.Close()
	}
	sum, err := runOne(ctx, sc, dir, ms, opts, stdout, stderr)
	if err != nil {
		return err
	}
	if !sum.Passed {
		return errObjectivesFailed
	}
	return nil
}

// tunnelOptions checks --tunnel and that the scenario can run against it: the runner's options for it.
func tunnelOptions(command, name string, sc *scenario.Scenario) (runner.Options, error) {
	if _, err := tunnels.Lookup(name); err != nil {
		return runner.Options{}, cli.UsageError{Err: fmt.Errorf("--tunnel: %w", err), Command: command}
	}
	if name == tunnels.Reuse {
		return runner.Options{}, nil // this project's full topology
	}
	if _, err := sc.CheckTunnel(name); err != nil {
		return runner.Options{}, cli.UsageError{Err: err}
	}
	return runner.Options{Tunnel: name}, nil
}

func startMetrics(addr string, stderr io.Writer) (*bench.MetricsServer, error) {
	if addr == "" {
		return nil, nil
	}
	ms, err := bench.StartMetricsServer(addr)
	if err != nil {
		return nil, cli.ListenError("metrics-listen", addr, err)
	}
	fmt.Fprintf(stderr, "serving metrics on http://%s/metrics\n", ms.Addr())
	return ms, nil
}

// runOne runs a scenario and writes its results to dir.
func runOne(ctx context.Context, sc *scenario.Scenario, dir string, ms *bench.MetricsServer, opts runner.Options, stdout, stderr io.Writer) (*runner.Summary, error) {
	opts.Progress = func(s string) { fmt.Fprintln(stderr, s) }
	if ms != nil {
		opts.Metrics = ms.Metrics
		opts.Attach = func(i int, g prometheus.Gatherer) func() { return ms.Attach("kas", fmt.Sprint(i), g) }
	}
	sum, err := runner.Run(ctx, sc, opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: interrupted", sc.Name)
		}
		return nil, fmt.Errorf("%s: %w", sc.Name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := sum.WriteJSON(dir); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, "report.md"), func(w io.Writer) error { return runner.WriteMarkdown(w, sum) }); err != nil {
		return nil, err
	}
	if _, err := runner.WritePlots(filepath.Join(dir, "plots"), sum); err != nil {
		// A chart that cannot be drawn costs its file, not the run's results.
		fmt.Fprintf(stderr, "%s: some plots were not written: %v\n", sc.Name, err)
	}
	if err := runner.WriteText(stdout, sum); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "results in %s\n\n", dir)
	return sum, nil
}

func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tunnelbench chaos", flag.ContinueOnError)
	cli.SetUsage(fs, chaosUsage)
	dir := fs.String("dir", "scenarios", "directory of scenario files (*.yaml)")
	out := fs.String("out", filepath.Join("results", "chaos-latest"), "directory for the results (results/chaos is the committed reference)")
	only := fs.String("only", "", "comma-separated scenario names to run (default all)")
	metricsListen := fs.String("metrics-listen", "", "serve the runs' metrics for Prometheus at this address, e.g. "+bench.DefaultMetricsListen)
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	scs, err := runner.LoadSuite(*dir, cli.SplitList(*only))
	if err != nil {
		return cli.UsageError{Err: err}
	}
	ms, err := startMetrics(*metricsListen, stderr)
	if err != nil {
		return err
	}
	if ms != nil {
		defer ms.Close()
	}
	var results []*runner.Summary
	failed := 0
	for i, sc := range scs {
		fmt.Fprintf(stderr, "[%d/%d] %s\n", i+1, len(scs), sc.Name)
		sum, err := runOne(ctx, sc, filepath.Join(*out, sc.Name), ms, runner.Options{}, stdout, stderr)
		if err != nil {
			return err
		}
		results = append(results, sum)
		if !sum.Passed {
			failed++
		}
	}
	if err := writeFile(filepath.Join(*out, "README.md"), func(w io.Writer) error { return runner.WriteChaosIndex(w, results) }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d of %d scenarios held; summary in %s\n", len(results)-failed, len(results), filepath.Join(*out, "README.md"))
	if failed > 0 {
		return fmt.Errorf("%d scenarios failed: %w", failed, errObjectivesFailed)
	}
	return nil
}
