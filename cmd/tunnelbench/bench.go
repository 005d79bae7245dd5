package main

import (
	"context"
	"errors"
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

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a, plan, err := bench.ParseArgs(args, stdout)
	if err != nil {
		return err
	}
	cfg, out, metricsListen := a.Config, &a.Out, &a.MetricsListen
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", *out, err)
	}
	plan.Options.Progress = progressPrinter(stderr)
	plan.Options.IdleCommand = idleCommand()
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
