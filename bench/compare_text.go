package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// TerminalWidth is the widest line the terminal reports write for the default matrix's case names:
// prose is wrapped to it, and tables keep one short cell per figure.
const TerminalWidth = 120

// WriteComparisonTable writes the comparison for the terminal: the verdict, the warnings and the rule,
// wrapped, then one row per case with the change of each judged figure, then the cases only one run
// has. Full figures (old → new) are in report.md and compare.json.
func WriteComparisonTable(w io.Writer, c Comparison) error {
	var b strings.Builder
	b.WriteString(wrap(c.VerdictText(), TerminalWidth, "") + "\n")
	for _, warn := range c.Warnings {
		b.WriteString(wrap("WARNING: "+warn+".", TerminalWidth, "  ") + "\n")
	}
	b.WriteString(wrap(c.ruleText(), TerminalWidth, "") + "\n")
	b.WriteString(wrap("Changes are old → new: of a tunneled case's ratios to direct (what is judged), of its own "+
		"figures when it has no ratio, of a direct case's own figures; ! worse beyond threshold and spread, + better "+
		"beyond them. Spread: the larger of the two runs' spreads over rounds (p50 / calls/s).", TerminalWidth, "") + "\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tp50\tp99\tcalls/s\tbytes/s\tspread\tverdict")
	for _, cc := range c.Cases {
		row := []string{cc.Name}
		for _, m := range Metrics {
			row = append(row, termChange(cc, m))
		}
		spread := "-"
		if cc.Spread != nil {
			spread = fmt.Sprintf("%.0f%%/%.0f%%", 100*cc.Spread[MetricP50], 100*cc.Spread[MetricCallsPerSec])
		}
		fmt.Fprintln(tw, strings.Join(append(row, spread, c.shortVerdict(cc)), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(c.OnlyOld) > 0 {
		b.WriteString(wrap("only in the old run: "+strings.Join(c.OnlyOld, ", "), TerminalWidth, "  ") + "\n")
	}
	if len(c.OnlyNew) > 0 {
		b.WriteString(wrap("only in the new run: "+strings.Join(c.OnlyNew, ", "), TerminalWidth, "  ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// termChange is the relative change of the figure a case is judged on for metric m ("+32.0%!"): the
// ratio to direct for a tunneled case, the figure itself for a direct one and for a tunneled case
// without ratios (a --target run without --target-direct: shown, not judged); "-" when either run
// lacks it.
func termChange(cc CaseChange, m Metric) string {
	old, new := m.of(&cc.Old), m.of(&cc.New)
	if !cc.Direct && cc.Old.RatioToDirect != nil && cc.New.RatioToDirect != nil {
		old, new = m.ofRatio(cc.Old.RatioToDirect), m.ofRatio(cc.New.RatioToDirect)
	}
	r, ok := rel(new, old)
	if !ok {
		return "-"
	}
	s := fmt.Sprintf("%+.1f%%", 100*(r-1))
	switch {
	case slices.Contains(cc.Regressed, m):
		s += "!"
	case slices.Contains(cc.Improved, m):
		s += "+"
	}
	return s
}

func (c Comparison) shortVerdict(cc CaseChange) string {
	switch {
	case cc.NewFailed:
		return "FAILED new"
	case cc.OldFailed:
		return "failed old"
	case cc.NewStalled:
		return "stalled new"
	case cc.OldStalled:
		return "stalled old"
	case cc.Direct:
		return "baseline"
	case len(cc.Worsening) == 0:
		return "no ratio"
	case len(c.Refused) > 0:
		return "not judged"
	case len(cc.Regressed) > 0:
		return "REGRESSED"
	case len(cc.Improved) > 0:
		return "improved"
	}
	return "within noise"
}

// wrap breaks text into lines of at most width runes at spaces (a longer word stays whole); lines
// after the first start with indent.
func wrap(text string, width int, indent string) string {
	var (
		lines []string
		line  string
	)
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
			if len(lines) > 0 {
				line = indent + word
			}
		case runeLen(line)+1+runeLen(word) > width:
			lines = append(lines, line)
			line = indent + word
		default:
			line += " " + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func runeLen(s string) int { return len([]rune(s)) }
