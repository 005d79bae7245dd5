package runner

// The readers' side of a scenario run: report.md, a short summary for the terminal, and an index over
// several runs. They only read a Summary; they never change it and never fail on odd data (a
// malformed section is said so in the text), only on a failed write.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdict says in one line whether the tunnel held and why not: "PASSED: the tunnel held; 3 of 3
// objectives met", or "FAILED: " and the run's failure and the objectives missed.
func Verdict(s *Summary) string {
	met, total := objectivesMet(s)
	count := fmt.Sprintf("%d of %d objectives met", met, total)
	if s.Passed {
		return "PASSED: the tunnel held; " + count
	}
	var why []string
	if s.Failure != "" {
		why = append(why, "the run failed: "+s.Failure)
	}
	var missed []string
	for _, o := range s.Objectives {
		if !o.OK {
			missed = append(missed, fmt.Sprintf("%s (want %s, got %s)", o.Name, o.Want, o.Got))
		}
	}
	if len(missed) > 0 {
		why = append(why, "missed "+strings.Join(missed, ", "))
	}
	if total > 0 {
		why = append(why, count)
	}
	if s.Failure == "" && len(missed) == 0 {
		why = append(why, "no reason recorded")
	}
	return "FAILED: " + strings.Join(why, "; ")
}

// shortVerdict is why a run failed in a few words, for the index: the run's failure or the names of
// the objectives missed.
func shortVerdict(s *Summary) string {
	if s.Passed {
		return ""
	}
	var why []string
	if s.Failure != "" {
		why = append(why, "run failed: "+s.Failure)
	}
	var missed []string
	for _, o := range s.Objectives {
		if !o.OK {
			missed = append(missed, o.Name)
		}
	}
	if len(missed) > 0 {
		why = append(why, "missed "+strings.Join(missed, ", "))
	}
	if len(why) == 0 {
		return "no reason recorded"
	}
	return strings.Join(why, "; ")
}

func objectivesMet(s *Summary) (met, total int) {
	for _, o := range s.Objectives {
		if o.OK {
			met++
		}
	}
	return met, len(s.Objectives)
}

// WriteText writes the terminal summary of one run: the verdict, one line per objective with ✓ or ✗,
// and one line of calls, latency and recovery.
func WriteText(w io.Writer, s *Summary) error {
	if s == nil {
		return errors.New("report: no summary")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s — %s\n", reportName(s), Verdict(s))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, o := range s.Objectives {
		fmt.Fprintf(tw, "  %s %s\twant %s\tgot %s\n", reportMark(o.OK), o.Name, o.Want, o.Got)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c := s.Calls
	missed := ""
	if c.Missed > 0 {
		missed = fmt.Sprintf(", %d missed", c.Missed)
	}
	fmt.Fprintf(&b, "  %d calls: %d ok, %d failed%s%s; p50 %s, p99 %s; recovery %s\n",
		c.Sent, c.OK, reportFailedTotal(c.FailedByCode), reportCodesInline(c.FailedByCode), missed,
		reportMs(c.LatencyUs.P50)+" ms", reportMs(c.LatencyUs.P99)+" ms", reportRecovery(s))
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes report.md of one run: the verdict first, then the environment, objectives,
// calls, recovery, faults, the routing histogram and a table of every second.
func WriteMarkdown(w io.Writer, s *Summary) error {
	if s == nil {
		return errors.New("report: no summary")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s — %s\n\n", reportCell(reportName(s)), reportCell(Verdict(s)))
	if s.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(s.Description))
	}
	if line := reportEnv(s); line != "" {
		fmt.Fprintf(&b, "%s\n\n", line)
	}
	reportTunnel(&b, s)
	if s.Failure != "" {
		fmt.Fprintf(&b, "**The run itself failed:** %s\n\n", s.Failure)
	}
	reportObjectives(&b, s)
	reportCalls(&b, s)
	reportRecoverySection(&b, s)
	reportFaults(&b, s)
	reportRouting(&b, s)
	reportTimeline(&b, s)
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

// WriteChaosIndex writes a markdown table over several runs, one row per run in the order given,
// headed by how many passed.
func WriteChaosIndex(w io.Writer, results []*Summary) error {
	passed := 0
	for i, s := range results {
		if s == nil {
			return fmt.Errorf("report: result %d: no summary", i)
		}
		if s.Passed {
			passed++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "**%d of %d scenarios passed.**\n\n", passed, len(results))
	b.WriteString("| scenario | result | objectives met | calls sent | failed | recovery | why |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|---|\n")
	for _, s := range results {
		met, total := objectivesMet(s)
		result := "✓ PASSED"
		if !s.Passed {
			result = "✗ FAILED"
		}
		fmt.Fprintf(&b, "| %s | %s | %d/%d | %d | %d | %s | %s |\n",
			reportCell(reportName(s)), result, met, total, s.Calls.Sent, reportFailedTotal(s.Calls.FailedByCode),
			reportRecovery(s), reportCell(shortVerdict(s)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func reportObjectives(b *strings.Builder, s *Summary) {
	b.WriteString("## Objectives\n\n")
	if len(s.Objectives) == 0 {
		b.WriteString("The scenario sets no objectives.\n\n")
		return
	}
	b.WriteString("| objective | want | got | ok |\n|---|---|---|:-:|\n")
	for _, o := range s.Objectives {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", reportCell(o.Name), reportCell(o.Want), reportCell(o.Got), reportMark(o.OK))
	}
	b.WriteString("\n")
}

func reportCalls(b *strings.Builder, s *Summary) {
	c := s.Calls
	failed := reportFailedTotal(c.FailedByCode)
	fmt.Fprintf(b, "## Calls\n\n%d sent, %d ok, %d failed", c.Sent, c.OK, failed)
	if c.Sent > 0 {
		fmt.Fprintf(b, " (success ratio %s)", reportRatio(c.OK, c.Sent))
	}
	b.WriteString(".\n\n")
	if c.Missed > 0 {
		fmt.Fprintf(b, "%d more calls were due but never started: the load's calls in flight were at their bound when it ended (missed).\n\n", c.Missed)
	}
	if len(c.FailedByCode) > 0 {
		b.WriteString("| failed with | calls |\n|---|--:|\n")
		for _, code := range reportCodes(c.FailedByCode) {
			fmt.Fprintf(b, "| %s | %d |\n", reportCell(code), c.FailedByCode[code])
		}
		b.WriteString("\n")
	}
	l := c.LatencyUs
	b.WriteString("Latency of every call, successful or not:\n\n")
	b.WriteString("| p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |\n|--:|--:|--:|--:|--:|\n")
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n\n", reportMs(l.P50), reportMs(l.P90), reportMs(l.P99), reportMs(l.P999), reportMs(l.Max))
}

func reportFaults(b *strings.Builder, s *Summary) {
	b.WriteString("## Faults\n\n")
	if len(s.Faults) == 0 {
		b.WriteString("No faults.\n\n")
		return
	}
	b.WriteString("| fault | from s | to s | lasted |\n|---|--:|--:|---|\n")
	for _, f := range s.Faults {
		lasted := "instant (not undone)"
		if f.EndS != f.StartS {
			lasted = reportSeconds(f.EndS - f.StartS)
		}
		fmt.Fprintf(b, "| %s | %.3f | %.3f | %s |\n", reportCell(f.Name), f.StartS, f.EndS, lasted)
	}
	b.WriteString("\n")
}

// reportTunnel says, for a run against another tunnel, what ran and what of the scenario it left out.
func reportTunnel(b *strings.Builder, s *Summary) {
	if s.Tunnel == "" {
		return
	}
	fmt.Fprintf(b, "Run against tunnel `%s` through its bench/tunnels adapter: one server, each agent's link to it through a fault proxy of its own, callers in the server's process.", s.Tunnel)
	if len(s.NotApplied) > 0 {
		b.WriteString(" Left out, since only this project's tunnel has them:\n\n")
		for _, n := range s.NotApplied {
			fmt.Fprintf(b, "- %s\n", n)
		}
	}
	b.WriteString("\n")
}

func reportRouting(b *strings.Builder, s *Summary) {
	r := s.Routing
	b.WriteString("## Routing\n\n")
	if s.Tunnel != "" {
		fmt.Fprintf(b, "None: tunnel %s has no kas to route calls.\n\n", s.Tunnel)
		return
	}
	fmt.Fprintf(b, "How long the routing kas took to find a tunnel, for successful routings over the run (tunnel_routing_duration); %d routing timeouts.\n\n", r.Timeouts)
	if len(r.BucketCounts) == 0 {
		b.WriteString("No routing histogram was recorded.\n\n")
		return
	}
	if len(r.BucketCounts) != len(r.BucketBoundsS)+1 {
		fmt.Fprintf(b, "The routing histogram is malformed: %d bounds and %d counts (want one count more than bounds).\n\n", len(r.BucketBoundsS), len(r.BucketCounts))
		return
	}
	var total uint64
	for _, n := range r.BucketCounts {
		total += n
	}
	b.WriteString("| routing took | routings | share |\n|---|--:|--:|\n")
	for i, n := range r.BucketCounts {
		share := "-"
		if total > 0 {
			share = fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
		}
		fmt.Fprintf(b, "| %s | %d | %s |\n", reportBucket(r.BucketBoundsS, i), n, share)
	}
	b.WriteString("\n")
}

func reportTimeline(b *strings.Builder, s *Summary) {
	b.WriteString("## Per second\n\n")
	if len(s.Timeline) == 0 {
		b.WriteString("No timeline was recorded.\n")
		return
	}
	b.WriteString("t is seconds since the load started. Offered counts the calls scheduled to start in the second; achieved the calls that finished in it and succeeded (a failed call is never throughput); failed and the latencies the calls that finished in it. Caught up marks the seconds that met the recovery rule. ")
	if s.Tunnel == "" {
		b.WriteString("Waiting is calls waiting for a tunnel; new conns is agent connections the kas instances accepted.\n\n")
	} else {
		fmt.Fprintf(b, "New conns is agent connections made through the links' proxies; %s has no kas, so no routing timeouts, tunnels or waiting calls (-).\n\n", s.Tunnel)
	}
	b.WriteString("| t | offered | achieved | failed | caught up | p50 ms | p99 ms | routing timeouts | tunnels idle/busy | waiting | new conns | faults |\n")
	b.WriteString("|--:|--:|--:|---|:-:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, sec := range s.Timeline {
		failed := strconv.FormatInt(reportFailedTotal(sec.ByCode), 10) + reportCodesInline(sec.ByCode)
		p50, p99 := "-", "-"
		if sec.Achieved+reportFailedTotal(sec.ByCode) > 0 {
			p50, p99 = reportMs(sec.LatencyUs.P50), reportMs(sec.LatencyUs.P99)
		}
		timeouts, tunnels, waiting := strconv.FormatInt(sec.RoutingTimeouts, 10), fmt.Sprintf("%d/%d", sec.TunnelsIdle, sec.TunnelsBusy), strconv.FormatInt(sec.WaitingCalls, 10)
		if s.Tunnel != "" {
			timeouts, tunnels, waiting = "-", "-", "-"
		}
		fmt.Fprintf(b, "| %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n",
			sec.T, sec.Offered, sec.Achieved, reportCell(failed), reportMark(caughtUp(sec)), p50, p99, timeouts,
			tunnels, waiting, sec.NewConnections, reportCell(strings.Join(sec.ActiveFaults, ", ")))
	}
}

// reportEnv is the environment line, leaving out what the summary does not record.
func reportEnv(s *Summary) string {
	e := s.Env
	head := "Run"
	if !e.StartedAt.IsZero() {
		head += " of " + e.StartedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	if e.OS != "" || e.Arch != "" {
		head += fmt.Sprintf(" on %s/%s, %d CPUs (GOMAXPROCS %d)", e.OS, e.Arch, e.CPUs, e.GOMAXPROCS)
		if e.CPUModel != "" {
			head += " (" + e.CPUModel + ")"
		}
	}
	parts := []string{head}
	if e.Go != "" {
		parts = append(parts, e.Go)
	}
	if e.GRPC != "" {
		parts = append(parts, "gRPC "+e.GRPC)
	}
	if e.GitCommit != "" {
		parts = append(parts, "commit `"+e.GitCommit[:min(12, len(e.GitCommit))]+"`")
	}
	if e.Target != "" {
		parts = append(parts, "against "+e.Target)
	}
	if s.File != "" {
		parts = append(parts, "scenario file `"+s.File+"`")
	}
	if len(parts) == 1 && head == "Run" {
		return ""
	}
	return strings.Join(parts, ", ") + "."
}

func reportName(s *Summary) string {
	name := s.Scenario
	if name == "" {
		name = "(unnamed scenario)"
	}
	if s.Tunnel != "" {
		name += " on " + s.Tunnel
	}
	return name
}

func reportMark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// reportCodes lists the codes, most failed calls first.
func reportCodes(byCode map[string]int64) []string {
	return slices.SortedFunc(maps.Keys(byCode), func(a, b string) int {
		return cmp.Or(cmp.Compare(byCode[b], byCode[a]), cmp.Compare(a, b))
	})
}

func reportFailedTotal(byCode map[string]int64) int64 {
	var n int64
	for _, v := range byCode {
		n += v
	}
	return n
}

// reportCodesInline is " (Unavailable 380, Internal 32)", or nothing without failures.
func reportCodesInline(byCode map[string]int64) string {
	if len(byCode) == 0 {
		return ""
	}
	var parts []string
	for _, c := range reportCodes(byCode) {
		parts = append(parts, fmt.Sprintf("%s %d", c, byCode[c]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// reportRatio is ok/sent with four decimals, or more when four would round a failure away to 1.
func reportRatio(ok, sent int64) string {
	r := float64(ok) / float64(sent)
	prec := 4
	for ok < sent && prec < 12 && strconv.FormatFloat(r, 'f', prec, 64) == strconv.FormatFloat(1, 'f', prec, 64) {
		prec++
	}
	return strconv.FormatFloat(r, 'f', prec, 64)
}

// reportMs writes microseconds as milliseconds with about three significant digits.
func reportMs(us int64) string {
	ms := float64(us) / 1000
	switch {
	case us == 0:
		return "0"
	case ms < 1:
		return strconv.FormatFloat(ms, 'f', 3, 64)
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64)
	case ms < 100:
		return strconv.FormatFloat(ms, 'f', 1, 64)
	}
	return strconv.FormatFloat(ms, 'f', 0, 64)
}

// reportSeconds writes a duration in seconds: "2.1 s", or "350 ms" below a second.
func reportSeconds(s float64) string {
	if math.Abs(s) < 1 {
		return strconv.FormatFloat(s*1000, 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(s, 'f', 1, 64) + " s"
}

// reportRecovery is the run's recovery in a few characters: "1.0 s", "not recovered", or "-" without
// faults.
func reportRecovery(s *Summary) string {
	switch {
	case len(s.NotRecovered) > 0:
		return "not recovered"
	case s.RecoveryS == nil:
		return "-"
	}
	return reportSeconds(*s.RecoveryS)
}

// reportRecoverySection says what recovery is and how long each fault took.
func reportRecoverySection(b *strings.Builder, s *Summary) {
	b.WriteString("## Recovery\n\n")
	if len(s.Faults) == 0 {
		b.WriteString("No fault was applied, so there was no recovery to measure.\n\n")
		return
	}
	switch {
	case len(s.NotRecovered) > 0:
		fmt.Fprintf(b, "**Not recovered:** calls never caught up after %s within the run.\n\n", strings.Join(s.NotRecovered, ", "))
	case s.RecoveryS != nil:
		fmt.Fprintf(b, "Calls caught up %s after the slowest fault.\n\n", reportSeconds(*s.RecoveryS))
	}
	tol := s.RecoveryTolerance
	if tol == 0 {
		tol = RecoveryTolerance
	}
	fmt.Fprintf(b, "A second caught up when the calls that succeeded in it were at least %s of the calls offered in it (less one call) and no call offered in it failed. A fault's recovery runs from when it was removed (a fault that lasted to the end of the load, or was not undone: when it was in place) to the start of the first second from which every second caught up, until the next fault or the end of the load.\n\n",
		strconv.FormatFloat(100*(1-tol), 'f', -1, 64)+"%")
	b.WriteString("| fault | counts from s | recovery |\n|---|--:|---|\n")
	for _, f := range s.Faults {
		r := "not recovered"
		if f.RecoveryS != nil {
			r = reportSeconds(*f.RecoveryS)
		}
		fmt.Fprintf(b, "| %s | %.3f | %s |\n", reportCell(f.Name), f.RecoveryFromS, r)
	}
	b.WriteString("\n")
}

// reportBucket names histogram bucket i: "≤ 1ms", "1ms – 4ms", "> 16.384s".
func reportBucket(bounds []float64, i int) string {
	switch {
	case i == 0 && len(bounds) > 0:
		return "≤ " + reportBound(bounds[0])
	case i == 0:
		return "all"
	case i == len(bounds):
		return "> " + reportBound(bounds[i-1])
	}
	return reportBound(bounds[i-1]) + " – " + reportBound(bounds[i])
}

// reportBound writes a bucket bound the short way, as bench/plot does: 0.001 → 1ms, 4.096 → 4.096s.
func reportBound(s float64) string {
	if time.Duration(s*float64(time.Second)) < time.Second {
		return strconv.FormatFloat(s*1000, 'f', -1, 64) + "ms"
	}
	return strconv.FormatFloat(s, 'f', -1, 64) + "s"
}

// reportCell makes text safe in a markdown table cell: no pipe ends the cell, no newline the row.
func reportCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}
