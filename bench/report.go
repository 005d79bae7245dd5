package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the cases as an aligned text table, for the terminal, then the failed cases with
// their errors by code. Headers take two lines so that rows stay within a terminal's width.
func WriteTable(w io.Writer, s *Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tp50\tp99\t\t\t\tp50\tcalls/s\tbytes/s\t\t")
	fmt.Fprintln(tw, "case\tµs\tµs\tcalls/s\tMB/s\terrors\t×direct\t×direct\t×direct\tresult\t")
	for _, c := range s.Cases {
		if c.Stalled() {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t%s\t\n", c.Name, resultCell(c))
			continue
		}
		r := c.RatioToDirect
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\t%d\t%s\t%s\t%s\t%s\t\n",
			c.Name, c.Latency.P50, c.Latency.P99, c.CallsPerSec, c.BytesPerSec/1e6, c.Errors,
			ratioCell(r, func(r *Ratio) float64 { return r.P50 }),
			ratioCell(r, func(r *Ratio) float64 { return r.CallsPerSec }),
			ratioCell(r, func(r *Ratio) float64 { return r.BytesPerSec }),
			resultCell(c))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var b strings.Builder
	if failures := s.Failures(); len(failures) > 0 {
		fmt.Fprintf(&b, "\n%s\n", wrap(s.failedHeadline()+" Calls/s and MB/s count successful calls only.", TerminalWidth, ""))
		for _, f := range failures {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	if stalls := s.Stalls(); len(stalls) > 0 {
		fmt.Fprintf(&b, "\n%s\n", wrap(s.stalledHeadline(), TerminalWidth, ""))
		for _, st := range stalls {
			fmt.Fprintf(&b, "  %s\n", wrap(st, TerminalWidth-2, "    "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func resultCell(c CaseResult) string {
	switch {
	case c.Stalled():
		return "stalled"
	case c.Failed:
		return "FAILED"
	}
	return "ok"
}

func ratioCell(r *Ratio, f func(*Ratio) float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", f(r))
}

// failedHeadline says how much of the run failed and by which rule.
func (s *Summary) failedHeadline() string {
	failed := 0
	for _, c := range s.Cases {
		if c.Failed {
			failed++
		}
	}
	what := fmt.Sprintf("%d of %d cases", failed, len(s.Cases))
	if steps := len(s.Failures()) - failed; steps > 0 {
		what += fmt.Sprintf(" and %d of %d scale steps", steps, len(s.Scale))
	}
	return fmt.Sprintf("FAILED: %s: more than %s of their calls failed (--max-error-rate), or none finished.",
		what, percent(s.maxErrorRate()))
}

func percent(share float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", 100*share), "0"), ".") + "%"
}

// WriteMarkdown writes report.md: the machine and settings, the failures first when there are any,
// then every case, then the scale steps.
func WriteMarkdown(w io.Writer, s *Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# tunnelbench results\n\n")
	e := s.Env
	fmt.Fprintf(&b, "Run of %s on %s/%s, %d CPUs (GOMAXPROCS %d)%s%s, %s, gRPC %s, commit `%s`.%s\n\n",
		e.StartedAt.Format("2006-01-02 15:04 UTC"), e.OS, e.Arch, e.CPUs, e.GOMAXPROCS, cpuSuffix(e.CPUModel), kernelSuffix(e.Kernel),
		e.Go, e.GRPC, shortCommit(e.GitCommit), loadText(e))
	writeMergedNote(&b, s)
	b.WriteString(settingsText(s.Settings) + "\n\n")
	if failures := s.Failures(); len(failures) > 0 {
		fmt.Fprintf(&b, "**%s** Their figures describe the errors, not the tunnel; failed calls never count as calls/s or MB/s.\n\n", s.failedHeadline())
		for _, f := range failures {
			name, why, _ := strings.Cut(f, ": ")
			fmt.Fprintf(&b, "- `%s`: %s\n", name, why)
		}
		b.WriteString("\n")
	}
	if stalls := s.Stalls(); len(stalls) > 0 {
		fmt.Fprintf(&b, "**%s**\n\n", s.stalledHeadline())
		for _, st := range stalls {
			name, why, _ := strings.Cut(st, ": ")
			fmt.Fprintf(&b, "- `%s`: %s\n", name, why)
		}
		b.WriteString("\n")
	}
	b.WriteString("Ratios are tunnel ÷ direct, measured in the same run: for latency lower is better, for throughput higher is better. " +
		"Spreads are (max − min) ÷ median over a case's rounds, of its figures and of its ratios to direct round by round.\n\n")
	b.WriteString("## Cases\n\n")
	b.WriteString("| case | result | p50 µs | p90 µs | p99 µs | p99.9 µs | calls/s | MB/s | allocs/call | errors | errors by code | routing p99 µs | p50 ×direct | p99 ×direct | calls/s ×direct | bytes/s ×direct | spread p50 / calls/s | ×direct spread p50 / calls/s |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range s.Cases {
		if c.Stalled() {
			fmt.Fprintf(&b, "| %s | %s |%s\n", c.Name, resultCell(c), strings.Repeat(" - |", 16))
			continue
		}
		r := c.RatioToDirect
		routing := "-"
		if c.Routing != nil {
			routing = fmt.Sprintf("%.0f", c.Routing.P99us)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %.0f | %.1f | %.0f | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			c.Name, resultCell(c), c.Latency.P50, c.Latency.P90, c.Latency.P99, c.Latency.P999, c.CallsPerSec, c.BytesPerSec/1e6, c.AllocsPerCall,
			c.Errors, c.errorsByCodeText(), routing,
			ratioCell(r, func(r *Ratio) float64 { return r.P50 }),
			ratioCell(r, func(r *Ratio) float64 { return r.P99 }),
			ratioCell(r, func(r *Ratio) float64 { return r.CallsPerSec }),
			ratioCell(r, func(r *Ratio) float64 { return r.BytesPerSec }),
			spreadCell(c.Spread), spreadCell(c.RatioSpread))
	}
	writeRoutingNote(&b, s)
	writeTunnelSection(&b, s)
	if len(s.Scale) > 0 {
		b.WriteString("\n## Scale\n\n")
		b.WriteString("kas's figures are the growth of its process per tunnel; the agents' are their own process's (\"-\": not measured apart, or by an older run).\n\n")
		b.WriteString("| agents | tunnels | connect s | kas heap B/tunnel | kas stacks B/tunnel | kas goroutines/tunnel | agent heap B/tunnel | agent heap B/agent | agent stacks B/agent | agent goroutines/agent | routing p99 µs | calls | errors |\n")
		b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, sc := range s.Scale {
			fmt.Fprintf(&b, "| %d | %d | %.2f | %.0f | %s | %.2f | %s | %s | %s | %s | %.0f | %d | %d |\n",
				sc.Agents, sc.Tunnels, sc.ConnectS, sc.KasHeapBytesPerTunnel, measuredCell(sc.KasStackBytesPerTunnel, "%.0f"),
				sc.KasGoroutinesPerTunnel, measuredCell(sc.AgentHeapBytesPerTunnel, "%.0f"), measuredCell(sc.AgentHeapBytesPerAgent, "%.0f"),
				measuredCell(sc.AgentStackBytesPerAgent, "%.0f"), measuredCell(sc.AgentGoroutinesPerAgent, "%.2f"),
				sc.RoutingP99us, sc.Calls, sc.Errors)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// measuredCell formats v, or says "-" for a figure that was not measured (zero or negative).
func measuredCell(v float64, format string) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// spreadCell is a spread's p50 and calls/s: "4.0% / 3.1%"; "-" without one.
func spreadCell(s *Spread) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%% / %.1f%%", 100*s.P50, 100*s.CallsPerSec)
}

func cpuSuffix(model string) string {
	if model == "" {
		return ""
	}
	return " (" + model + ")"
}

func kernelSuffix(k string) string {
	if k == "" {
		return ""
	}
	return ", kernel " + k
}

// loadText is the machine's load average at the start and end of the run, when recorded.
func loadText(e Env) string {
	la := func(v []float64) string {
		return fmt.Sprintf("%.2f / %.2f / %.2f", v[0], v[1], v[2])
	}
	switch {
	case len(e.LoadAvg) == 3 && len(e.LoadAvgEnd) == 3:
		return fmt.Sprintf(" Load average (1 / 5 / 15 min) %s at the start, %s at the end.", la(e.LoadAvg), la(e.LoadAvgEnd))
	case len(e.LoadAvg) == 3:
		return fmt.Sprintf(" Load average (1 / 5 / 15 min) %s at the start.", la(e.LoadAvg))
	}
	return ""
}

// settingsText says how the run measured, and for a --target run what it measured and how it reached
// it (never the caller token).
func settingsText(st *Settings) string {
	if st == nil {
		return "Settings: not recorded (schema v1)."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Settings: warm-up %gs and %gs per case in %d rounds (the paths of a group take turns), ", st.WarmupS, st.DurationS, st.Rounds)
	switch st.Topology {
	case TopologyTarget:
		b.WriteString("against an existing deployment")
	case TopologyProcesses:
		fmt.Fprintf(&b, "topology of processes: %d kas, %d agents with %d tunnels each", st.Kas, st.Agents, st.TunnelsPerAgent)
	default:
		fmt.Fprintf(&b, "in-process topology over %s: %d kas, %d agents with %d tunnels each", st.Transport, st.Kas, st.Agents, st.TunnelsPerAgent)
	}
	if st.HTTPRate > 0 {
		fmt.Fprintf(&b, "; HTTP cases at %g requests/s", st.HTTPRate)
	}
	fmt.Fprintf(&b, "; a case fails when more than %s of its calls fail", percent(st.MaxErrorRate))
	if st.Quick {
		b.WriteString(" (--quick)")
	}
	b.WriteString(".")
	if t := st.Target; t != nil {
		fmt.Fprintf(&b, " Target: kas public API at `%s`", t.Address)
		if t.TLS {
			b.WriteString(" over TLS")
			var how []string
			if t.CAFile != "" {
				how = append(how, "CA file `"+t.CAFile+"`")
			} else {
				how = append(how, "system roots")
			}
			if t.ServerName != "" {
				how = append(how, "server name `"+t.ServerName+"`")
			}
			if t.ClientCertFile != "" {
				how = append(how, "client certificate `"+t.ClientCertFile+"`")
			}
			fmt.Fprintf(&b, " (%s)", strings.Join(how, ", "))
		} else {
			b.WriteString(" in plaintext")
		}
		if t.CallerToken {
			fmt.Fprintf(&b, " with a caller token from `%s`", t.TokenFile)
		} else {
			b.WriteString(" without a caller token")
		}
		fmt.Fprintf(&b, ", agent %d", t.Agent)
		if t.Direct != "" {
			fmt.Fprintf(&b, "; direct baseline at `%s`", t.Direct)
		} else {
			b.WriteString("; no direct baseline")
		}
		if t.Metrics != "" {
			fmt.Fprintf(&b, "; routing figures from `%s`", t.Metrics)
		}
		b.WriteString(".")
	}
	return b.String()
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
