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

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

const mergeUsage = `
tunnelbench merge combines the results of one matrix run at the same time from several load hosts
(each a tunnelbench bench with the same flags, typically --target against the same deployment) into
one report: per case, the latency percentiles of every host's calls together (histograms merged, not
averaged), calls, errors and throughputs summed. It refuses runs of different matrices or settings and
summaries without latency histograms (written before merge existed), with the reason.

Results: OUT/summary.json (schema tunnelbench/bench/v3, listing the runs in merged_from), OUT/report.md
and OUT/plots/, as bench writes them.

Usage: tunnelbench merge [--out DIR] RUN RUN...   (RUN: a bench results directory or its summary.json)
`

// maxMergeRuns bounds the positional arguments; far more load hosts than anyone runs.
const maxMergeRuns = 1000

func runMerge(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tunnelbench merge", flag.ContinueOnError)
	cli.SetUsage(fs, mergeUsage)
	out := fs.String("out", filepath.Join("results", "merged"), "directory for the merged summary.json, report.md and plots")
	dirs, err := cli.ParsePositional(fs, args, stdout, maxMergeRuns)
	if err != nil {
		return err
	}
	if len(dirs) < 2 {
		return cli.Usagef("merge needs at least two runs' directories, got %d", len(dirs))
	}
	for _, d := range dirs {
		if sameDir(runDir(d), *out) {
			return cli.Usagef("--out %s is one of the runs: its summary.json would be overwritten", *out)
		}
	}
	runs, err := bench.ReadMergeInputs(dirs)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	sum, err := bench.Merge(runs)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", *out, err)
	}
	files, err := write(*out, sum)
	if err != nil {
		return err
	}
	for _, w := range bench.MergeWarnings(sum) {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(stdout, "merged %d runs\n\n", len(runs))
	if err := bench.WriteTable(stdout, sum); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join(files, ", "))
	if f := sum.Failures(); len(f) > 0 {
		// The same rule as bench: a merged case with errors beyond the tolerated rate fails the run.
		return errors.New(failedText(sum, len(f)))
	}
	return nil
}

func sameDir(a, b string) bool {
	aa, errA := filepath.Abs(a)
	ab, errB := filepath.Abs(b)
	return errA == nil && errB == nil && aa == ab
}

// runDir is the results directory a RUN argument names.
func runDir(arg string) string {
	if filepath.Base(arg) == "summary.json" {
		return filepath.Dir(arg)
	}
	return arg
}
