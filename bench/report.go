package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the cases as an aligned text table, for the terminal.
func WriteTable(w io.Writer, s *Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tp50 µs\tp99 µs\tcalls/s\tMB/s\tallocs/call\terrors\tp50 ×direct\tcalls/s ×direct\tbytes/s ×direct\t")
	for _, c := range s.Cases {
		r := c.RatioToDirect
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\t%.0f\t%d\t%s\t%s\t%s\t\n",
			c.Name, c.Latency.P50, c.Latency.P99, c.CallsPerSec, c.BytesPerSec/1e6, c.AllocsPerCall, c.Errors,
			ratioCell(r, func(r *Ratio) float64 { return r.P50 }),
			ratioCell(r, func(r *Ratio) float64 { return r.CallsPerSec }),
			ratioCell(r, func(r *Ratio) float64 { return r.BytesPerSec }))
	}
	return tw.Flush()
}

func ratioCell(r *Ratio, f func(*Ratio) float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", f(r))
}

// WriteMarkdown writes report.md: the headline first, then every case, then the scale steps.
func WriteMarkdown(w io.Writer, s *Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# tunnelbench results\n\n")
	e := s.Env
	fmt.Fprintf(&b, "Run of %s on %s/%s, %d CPUs (GOMAXPROCS %d)%s, %s, gRPC %s, commit `%s`.\n\n",
		e.StartedAt.Format("2006-01-02 15:04 UTC"), e.OS, e.Arch, e.CPUs, e.GOMAXPROCS, cpuSuffix(e.CPUModel), e.Go, e.GRPC, shortCommit(e.GitCommit))
	writeMergedNote(&b, s)
	b.WriteString("Ratios are tunnel ÷ direct, measured in the same run: for latency lower is better, for throughput higher is better.\n\n")
	b.WriteString("## Cases\n\n")
	b.WriteString("| case | p50 µs | p90 µs | p99 µs | p99.9 µs | calls/s | MB/s | allocs/call | errors | routing p99 µs | p50 ×direct | p99 ×direct | calls/s ×direct | bytes/s ×direct |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range s.Cases {
		r := c.RatioToDirect
		routing := "-"
		if c.Routing != nil {
			routing = fmt.Sprintf("%.0f", c.Routing.P99us)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.0f | %.1f | %.0f | %d | %s | %s | %s | %s | %s |\n",
			c.Name, c.Latency.P50, c.Latency.P90, c.Latency.P99, c.Latency.P999, c.CallsPerSec, c.BytesPerSec/1e6, c.AllocsPerCall, c.Errors, routing,
			ratioCell(r, func(r *Ratio) float64 { return r.P50 }),
			ratioCell(r, func(r *Ratio) float64 { return r.P99 }),
			ratioCell(r, func(r *Ratio) float64 { return r.CallsPerSec }),
			ratioCell(r, func(r *Ratio) float64 { return r.BytesPerSec }))
	}
	writeRoutingNote(&b, s)
	if len(s.Scale) > 0 {
		b.WriteString("\n## Scale\n\n")
		b.WriteString("| agents | tunnels | connect s | kas heap B/tunnel | kas goroutines/tunnel | agent heap B/tunnel | agent heap B/agent | routing p99 µs | calls | errors |\n")
		b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, sc := range s.Scale {
			fmt.Fprintf(&b, "| %d | %d | %.2f | %.0f | %.2f | %.0f | %.0f | %.0f | %d | %d |\n",
				sc.Agents, sc.Tunnels, sc.ConnectS, sc.KasHeapBytesPerTunnel, sc.KasGoroutinesPerTunnel,
				sc.AgentHeapBytesPerTunnel, sc.AgentHeapBytesPerAgent, sc.RoutingP99us, sc.Calls, sc.Errors)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cpuSuffix(model string) string {
	if model == "" {
		return ""
	}
	return " (" + model + ")"
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
