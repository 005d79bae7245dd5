package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tunnelbench/tunnelbench/bench/tunnels"
)

// SideBySide is the matrix's figures arranged by tunnel: a row per tunnel (as a path of this project's
// topology, or an adapter) and a column per case (shape and concurrency). Cases of a summary without
// tunnels (before v3) and the HTTP cases (this project's only) are left out.
type SideBySide struct {
	// Columns are the cases' shape and concurrency ("unary-64B/c1"), in run order.
	Columns []string
	// Rows are the tunnels as measured: direct, this project's paths, then the adapters, in run order.
	Rows []string
	// Tunnels maps each row to its tunnel's name (tunnel-public and tunnel-2hop to tunnel).
	Tunnels map[string]string
	cells   map[[2]string]*CaseResult
}

// SideBySideOf arranges s's cases by tunnel.
func SideBySideOf(s *Summary) SideBySide {
	t := SideBySide{Tunnels: map[string]string{}, cells: map[[2]string]*CaseResult{}}
	for i := range s.Cases {
		c := &s.Cases[i]
		if c.Tunnel == "" || c.Mode == "open" {
			continue
		}
		i := strings.LastIndex(c.Name, "/")
		if i < 0 {
			continue
		}
		col, row := c.Name[:i], c.Name[i+1:]
		if !slices.Contains(t.Columns, col) {
			t.Columns = append(t.Columns, col)
		}
		if !slices.Contains(t.Rows, row) {
			t.Rows = append(t.Rows, row)
		}
		t.Tunnels[row] = c.Tunnel
		t.cells[[2]string{row, col}] = c
	}
	return t
}

// Case is the case of row and column, or nil.
func (t SideBySide) Case(row, col string) *CaseResult { return t.cells[[2]string{row, col}] }

// tunnelFigure is one table of the side-by-side section.
type tunnelFigure struct {
	title string
	// baseline says whether the direct row belongs in the table (not in ratios to itself).
	baseline bool
	cell     func(c *CaseResult) string
}

var tunnelFigures = []tunnelFigure{
	{"p50 latency ×direct (lower is better)", false, ratioFigure(MetricP50)},
	{"p99 latency ×direct (lower is better)", false, ratioFigure(MetricP99)},
	{"calls/s ×direct (higher is better)", false, ratioFigure(MetricCallsPerSec)},
	{"bytes/s ×direct (higher is better)", false, ratioFigure(MetricBytesPerSec)},
	{"CPU µs per call (this process: caller, tunnel and agent; lower is better)", true, func(c *CaseResult) string {
		if c.CPUusPerCall <= 0 {
			return "-"
		}
		return compactNumber(c.CPUusPerCall)
	}},
	{"Allocations per call (this process; lower is better)", true, func(c *CaseResult) string {
		return fmt.Sprintf("%.0f", c.AllocsPerCall)
	}},
}

// ratioFigure is a cell of metric m's ratio to direct with its spread over rounds: "1.31 (4%)".
func ratioFigure(m Metric) func(c *CaseResult) string {
	return func(c *CaseResult) string {
		if c.RatioToDirect == nil {
			return "-"
		}
		cell := fmt.Sprintf("%.2f", m.ofRatio(c.RatioToDirect))
		if c.RatioSpread != nil {
			cell += fmt.Sprintf(" (%.0f%%)", 100*c.RatioSpread.of(m))
		}
		return cell
	}
}

// compactNumber keeps three significant figures or so, without an exponent: 4.25, 41.2, 1234.
func compactNumber(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// sideCell is a figure's cell, or what stands in for a figure: "stalled", "FAILED", "-".
func sideCell(c *CaseResult, f func(*CaseResult) string) string {
	switch {
	case c == nil:
		return "-"
	case c.Stalled():
		return "stalled"
	case c.Failed:
		return "FAILED"
	}
	return f(c)
}

// writeTunnelSection writes report.md's side-by-side section: one table per figure with a row per
// tunnel and a column per case, then the idle cost per agent of each tunnel. Nothing for a summary
// without tunnels (before v3).
func writeTunnelSection(b *strings.Builder, s *Summary) {
	t := SideBySideOf(s)
	if len(t.Rows) == 0 {
		return
	}
	b.WriteString("\n## Tunnels side by side\n\n")
	b.WriteString("Every tunnel on every case, in turns with the same direct baseline. Ratios are tunnel ÷ direct in the same run, " +
		"with their spread over the rounds in brackets ((max − min) ÷ median of the per-round ratios). " +
		"Rows are this project's tunnel on each path (`tunnel`: the caller inside kas; `tunnel-public`: through kas's public API; " +
		"`tunnel-2hop`: through a second kas; `tunnel-single-use`: a tunnel per call) and the other tunnels, each with the caller " +
		"in its server's process, as on the `tunnel` path: compare them with that row. " +
		"A cell says stalled when the tunnel stopped completing calls under that case's load (no figures; see the stalls above), " +
		"FAILED when too many calls failed. The HTTP cases are this project's tunnel only and are not here.")
	for _, ti := range s.Tunnels {
		if ti.Kind == tunnels.KindReference.String() {
			fmt.Fprintf(b, " `%s` is a reference, not a tunnel (%s): its caller reaches it over loopback TCP, so compare it with `tunnel-public`.", ti.Name, ti.About)
		}
	}
	b.WriteString("\n")
	for _, f := range tunnelFigures {
		var rows []string
		for _, row := range t.Rows {
			if !f.baseline && t.Tunnels[row] == tunnels.Direct {
				continue
			}
			cells := make([]string, len(t.Columns))
			for i, col := range t.Columns {
				cells[i] = sideCell(t.Case(row, col), f.cell)
			}
			rows = append(rows, fmt.Sprintf("| %s | %s |\n", row, strings.Join(cells, " | ")))
		}
		if len(rows) == 0 {
			continue // ratios of a run of the baseline alone
		}
		fmt.Fprintf(b, "\n### %s\n\n", f.title)
		b.WriteString("| tunnel | " + strings.Join(t.Columns, " | ") + " |\n")
		b.WriteString("|---" + strings.Repeat("|--:", len(t.Columns)) + "|\n")
		b.WriteString(strings.Join(rows, ""))
	}
	writeIdleTable(b, s)
}

// writeIdleTable writes each tunnel's idle cost per agent, when the run measured it.
func writeIdleTable(b *strings.Builder, s *Summary) {
	var agents []int
	for _, ti := range s.Tunnels {
		if ti.Idle != nil && !slices.Contains(agents, ti.Idle.Agents) {
			agents = append(agents, ti.Idle.Agents)
		}
	}
	if len(agents) == 0 {
		return
	}
	b.WriteString("\n### Idle cost per agent\n\n")
	counts := make([]string, len(agents))
	for i, n := range agents {
		counts[i] = fmt.Sprint(n)
	}
	fmt.Fprintf(b, "What an idle agent costs, both ends of the tunnel together (server side and agent in one process): the difference "+
		"between the tunnel's server alone and with %s agents connected, each measured once the heap had settled, divided by the agents.\n\n",
		strings.Join(counts, " or "))
	b.WriteString("| tunnel | kind | heap KiB | goroutine stacks KiB | goroutines | restarts after a stall | what it is |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|---|\n")
	for _, ti := range s.Tunnels {
		if ti.Idle == nil {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %.1f | %.1f | %.1f | %d | %s |\n", ti.Name, ti.Kind, ti.Idle.HeapBytesPerAgent/1024,
			ti.Idle.StackBytesPerAgent/1024, ti.Idle.GoroutinesPerAgent, ti.Restarts, ti.About)
	}
}
