package bench

import (
	"fmt"
	"strings"
)

// writeMergedNote says in report.md that a summary is a merge, of which runs, and what its figures
// are; nothing for a single run.
func writeMergedNote(b *strings.Builder, s *Summary) {
	if len(s.MergedFrom) == 0 {
		return
	}
	fmt.Fprintf(b, "Merged by `tunnelbench merge` from %d runs of the same matrix on several load hosts: each case's latency percentiles are those of all the runs' calls together (their histograms merged), calls, errors, calls/s and bytes/s are summed, allocations per call averaged over the calls. Routing figures and scale steps are not merged: each run's own report has them.\n\n", len(s.MergedFrom))
	b.WriteString("| run | started | machine | commit | timed load s |\n|---|---|---|---|--:|\n")
	for _, r := range s.MergedFrom {
		e := r.Env
		fmt.Fprintf(b, "| %s | %s | %s/%s, %d CPUs%s | `%s` | %.0f |\n", r.Dir, e.StartedAt.Format("2006-01-02 15:04:05 UTC"), e.OS, e.Arch, e.CPUs, cpuSuffix(e.CPUModel), shortCommit(e.GitCommit), r.TimedS)
	}
	b.WriteString("\n")
	for _, w := range MergeWarnings(s) {
		fmt.Fprintf(b, "**Warning:** %s.\n\n", w)
	}
}
