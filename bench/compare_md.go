package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Verdicts of a whole comparison (compare.json's "verdict").
const (
	VerdictRegressed    = "regressed"
	VerdictNoRegression = "no regression"
	VerdictRefused      = "refused"
)

// Verdict is the comparison's outcome: VerdictRefused, VerdictRegressed or VerdictNoRegression.
func (c Comparison) Verdict() string {
	switch {
	case len(c.Refused) > 0:
		return VerdictRefused
	case len(c.Regressions()) > 0:
		return VerdictRegressed
	}
	return VerdictNoRegression
}

// VerdictText says the outcome in one sentence, for the terminal, report.md and compare.json.
func (c Comparison) VerdictText() string {
	var s string
	switch c.Verdict() {
	case VerdictRefused:
		s = fmt.Sprintf("REFUSED: the runs measured differently (%s); their figures are shown, no case is judged.", strings.Join(c.Refused, "; "))
	case VerdictRegressed:
		var names []string
		for _, cc := range c.Regressions() {
			names = append(names, fmt.Sprintf("%s (%s)", cc.Name, metricNames(cc.Regressed)))
		}
		s = fmt.Sprintf("REGRESSED: %s beyond noise and spread: %s.", plural(len(names), "case"), strings.Join(names, ", "))
	default:
		s = fmt.Sprintf("No regression beyond noise and spread among %s compared", plural(len(c.Cases), "case"))
		if n := len(c.Improvements()); n > 0 {
			s += fmt.Sprintf("; %s improved", plural(n, "case"))
		}
		s += "."
	}
	if failed := c.failedNames(); len(failed) > 0 {
		s += fmt.Sprintf(" Not judged, failed in a run: %s.", strings.Join(failed, ", "))
	}
	if stalled := c.stalledNames(); len(stalled) > 0 {
		s += fmt.Sprintf(" Not judged, stalled in a run: %s.", strings.Join(stalled, ", "))
	}
	return s
}

func (c Comparison) stalledNames() []string {
	var out []string
	for _, cc := range c.Cases {
		if (cc.OldStalled || cc.NewStalled) && !cc.OldFailed && !cc.NewFailed {
			out = append(out, cc.Name)
		}
	}
	return out
}

func (c Comparison) failedNames() []string {
	var out []string
	for _, cc := range c.Cases {
		if cc.OldFailed || cc.NewFailed {
			out = append(out, cc.Name)
		}
	}
	return out
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func metricNames(ms []Metric) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m) + " ×direct"
	}
	return strings.Join(s, ", ")
}

// WriteComparison writes the comparison as a Markdown document: the runs, the verdict, the warnings, the
// rule with this pair's noise and thresholds, then one row per case with old → new and the change of
// each figure, then the cases only one run has.
func WriteComparison(w io.Writer, c Comparison) error {
	return writeComparisonMarkdown(w, "# tunnelbench comparison", c)
}

// WriteComparisonSection writes the comparison as a section of report.md.
func WriteComparisonSection(w io.Writer, c Comparison) error {
	title := "## Comparison"
	if c.OldName != "" {
		title += " with `" + c.OldName + "`"
	}
	return writeComparisonMarkdown(w, title, c)
}

func writeComparisonMarkdown(w io.Writer, title string, c Comparison) error {
	var b strings.Builder
	b.WriteString(title + "\n\n")
	fmt.Fprintf(&b, "Old: %s. New: %s.\n\n", runLine(c.Old), runLine(c.New))
	fmt.Fprintf(&b, "**Verdict: %s**\n\n", c.VerdictText())
	for _, warn := range c.Warnings {
		fmt.Fprintf(&b, "- Warning: %s.\n", warn)
	}
	if len(c.Warnings) > 0 {
		b.WriteString("\n")
	}
	b.WriteString(c.ruleText())
	b.WriteString("\n\n")
	header, rows := c.rows()
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|---" + strings.Repeat("|--:", len(header)-2) + "|---|\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	if len(c.OnlyOld) > 0 {
		fmt.Fprintf(&b, "\nOnly in the old run: %s.\n", strings.Join(c.OnlyOld, ", "))
	}
	if len(c.OnlyNew) > 0 {
		fmt.Fprintf(&b, "\nOnly in the new run: %s.\n", strings.Join(c.OnlyNew, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func runLine(e Env) string {
	return fmt.Sprintf("%s, commit `%s`", e.StartedAt.UTC().Format("2006-01-02 15:04 UTC"), shortCommit(e.GitCommit))
}

func (c Comparison) ruleText() string {
	var noise, thr []string
	for _, m := range Metrics {
		noise = append(noise, fmt.Sprintf("%s ±%.1f%%", m, 100*c.Noise[m]))
		thr = append(thr, fmt.Sprintf("%s %.1f%%", m, 100*c.Threshold[m]))
	}
	return fmt.Sprintf("Noise (median move of the %d direct cases in both runs): %s. "+
		"A tunneled case is flagged when a ratio to direct worsened by more than max(%.0f%%, %g × noise): %s, "+
		"and by more than its spread over rounds in either run; such a ratio is marked with !.",
		c.NoiseCases, strings.Join(noise, ", "), 100*CompareMinWorsening, CompareNoiseFactor, strings.Join(thr, ", "))
}

func (c Comparison) rows() (header []string, rows [][]string) {
	header = []string{"case", "p50 µs", "p99 µs", "calls/s", "MB/s", "p50 ×direct", "p99 ×direct", "calls/s ×direct", "bytes/s ×direct",
		"spread p50 / calls/s", "verdict"}
	for _, cc := range c.Cases {
		o, n := &cc.Old, &cc.New
		row := []string{cc.Name,
			changeCell("%.0f", float64(o.Latency.P50), float64(n.Latency.P50)),
			changeCell("%.0f", float64(o.Latency.P99), float64(n.Latency.P99)),
			changeCell("%.0f", o.CallsPerSec, n.CallsPerSec),
			changeCell("%.1f", o.BytesPerSec/1e6, n.BytesPerSec/1e6),
		}
		for _, m := range Metrics {
			if o.RatioToDirect == nil || n.RatioToDirect == nil {
				row = append(row, "-")
				continue
			}
			cell := changeCell("%.2f", m.ofRatio(o.RatioToDirect), m.ofRatio(n.RatioToDirect))
			if slices.Contains(cc.Regressed, m) {
				cell += " !"
			}
			row = append(row, cell)
		}
		rows = append(rows, append(row, cc.spreadCell(), c.verdict(cc)))
	}
	return header, rows
}

// spreadCell is the case's judged spread over rounds, p50 and calls/s: "4.0% / 3.1%"; "-" without rounds.
func (cc CaseChange) spreadCell() string {
	if cc.Spread == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%% / %.1f%%", 100*cc.Spread[MetricP50], 100*cc.Spread[MetricCallsPerSec])
}

// changeCell is "old → new (+x%)".
func changeCell(format string, old, new float64) string {
	s := fmt.Sprintf(format+" → "+format, old, new)
	if r, ok := rel(new, old); ok {
		s += fmt.Sprintf(" (%+.1f%%)", 100*(r-1))
	}
	return s
}

func (c Comparison) verdict(cc CaseChange) string {
	switch {
	case cc.NewFailed:
		return "FAILED in the new run"
	case cc.OldFailed:
		return "failed in the old run"
	case cc.NewStalled:
		return "stalled in the new run"
	case cc.OldStalled:
		return "stalled in the old run"
	case cc.Direct:
		return "baseline"
	case len(cc.Worsening) == 0:
		return "no ratio"
	case len(c.Refused) > 0:
		return "not judged"
	case len(cc.Regressed) > 0 && len(cc.Improved) > 0:
		return "REGRESSED " + metricNames(cc.Regressed) + "; improved " + metricNames(cc.Improved)
	case len(cc.Regressed) > 0:
		return "REGRESSED " + metricNames(cc.Regressed)
	case len(cc.Improved) > 0:
		return "improved " + metricNames(cc.Improved)
	}
	return "within noise"
}
