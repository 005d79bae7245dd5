package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// Comparison defaults: see Compare for the rule they take part in.
const (
	// CompareMinWorsening is the smallest worsening of a ratio to direct that Compare flags, however
	// quiet the two runs were: 10%.
	CompareMinWorsening = 0.10
	// CompareNoiseFactor is how many times the runs' own noise a ratio must worsen by to be flagged.
	CompareNoiseFactor = 2.0
)

// Metric is a figure that Compare compares.
type Metric string

// Metrics, in table order.
const (
	MetricP50         Metric = "p50"
	MetricP99         Metric = "p99"
	MetricCallsPerSec Metric = "calls/s"
	MetricBytesPerSec Metric = "bytes/s"
)

// Metrics lists every compared metric in table order.
var Metrics = []Metric{MetricP50, MetricP99, MetricCallsPerSec, MetricBytesPerSec}

// lowerIsBetter tells latencies from throughputs.
func (m Metric) lowerIsBetter() bool { return m == MetricP50 || m == MetricP99 }

func (m Metric) of(c *CaseResult) float64 {
	switch m {
	case MetricP50:
		return float64(c.Latency.P50)
	case MetricP99:
		return float64(c.Latency.P99)
	case MetricCallsPerSec:
		return c.CallsPerSec
	default:
		return c.BytesPerSec
	}
}

func (m Metric) ofRatio(r *Ratio) float64 {
	switch m {
	case MetricP50:
		return r.P50
	case MetricP99:
		return r.P99
	case MetricCallsPerSec:
		return r.CallsPerSec
	default:
		return r.BytesPerSec
	}
}

// Comparison is what changed from one run to another, case by case.
type Comparison struct {
	Old, New Env
	// Noise is, per metric, the median over the direct cases present in both runs of how much the
	// metric moved (relative, either way). NoiseCases is how many direct cases that took.
	Noise      map[Metric]float64
	NoiseCases int
	// Threshold is, per metric, how much a ratio to direct must worsen to be flagged.
	Threshold map[Metric]float64
	// Cases are the cases present in both runs, in the new run's order.
	Cases []CaseChange
	// OnlyOld and OnlyNew name the cases that only one run has.
	OnlyOld, OnlyNew []string
}

// CaseChange is one case in both runs.
type CaseChange struct {
	Name     string
	Direct   bool
	Old, New CaseResult
	// Worsening is, per metric, how much the case's ratio to direct worsened: +0.25 is 25% worse
	// (a latency ratio ×1.25, a throughput ratio ÷1.25), negative is better. Only metrics with a
	// ratio in both runs are present, so it is empty for direct cases.
	Worsening map[Metric]float64
	// Regressed and Improved list the metrics whose ratio moved beyond the threshold.
	Regressed, Improved []Metric
}

// Compare compares two runs case by case (cases are matched by name).
//
// The rule for flagging a regression: a tunneled case's figures move with the machine, so Compare
// judges its ratios to direct, which were measured against a direct pair in the same run. The direct
// cases run the same code in both runs, so how much they moved is the runs' own noise: per metric,
// the median over the direct cases of |change| (max(new/old, old/new) - 1). A tunneled case is
// flagged as regressed on a metric when its ratio worsened by more than
// max(CompareMinWorsening, CompareNoiseFactor × noise) — for p50 and p99 the ratio grew by that
// factor, for calls/s and bytes/s it shrank by it — and as improved when it got better by as much.
// With no direct case in both runs the noise is unknown and CompareMinWorsening alone applies.
func Compare(old, new *Summary) Comparison {
	c := Comparison{Old: old.Env, New: new.Env, Noise: map[Metric]float64{}, Threshold: map[Metric]float64{}}
	oldByName := map[string]*CaseResult{}
	for i := range old.Cases {
		oldByName[old.Cases[i].Name] = &old.Cases[i]
	}
	seen := map[string]bool{}
	for i := range new.Cases {
		n := &new.Cases[i]
		o, ok := oldByName[n.Name]
		if !ok {
			c.OnlyNew = append(c.OnlyNew, n.Name)
			continue
		}
		seen[n.Name] = true
		c.Cases = append(c.Cases, CaseChange{Name: n.Name, Direct: n.Path == string(PathDirect), Old: *o, New: *n})
	}
	for _, o := range old.Cases {
		if !seen[o.Name] {
			c.OnlyOld = append(c.OnlyOld, o.Name)
		}
	}

	moves := map[Metric][]float64{}
	for _, cc := range c.Cases {
		if !cc.Direct {
			continue
		}
		c.NoiseCases++
		for _, m := range Metrics {
			if r, ok := rel(m.of(&cc.New), m.of(&cc.Old)); ok {
				moves[m] = append(moves[m], math.Max(r, 1/r)-1)
			}
		}
	}
	for _, m := range Metrics {
		c.Noise[m] = median(moves[m])
		c.Threshold[m] = math.Max(CompareMinWorsening, CompareNoiseFactor*c.Noise[m])
	}

	for i := range c.Cases {
		cc := &c.Cases[i]
		cc.Worsening = map[Metric]float64{}
		if cc.Direct || cc.Old.RatioToDirect == nil || cc.New.RatioToDirect == nil {
			continue
		}
		for _, m := range Metrics {
			r, ok := rel(m.ofRatio(cc.New.RatioToDirect), m.ofRatio(cc.Old.RatioToDirect))
			if !ok {
				continue
			}
			if !m.lowerIsBetter() {
				r = 1 / r
			}
			cc.Worsening[m] = r - 1
			switch t := c.Threshold[m]; {
			case r-1 > t:
				cc.Regressed = append(cc.Regressed, m)
			case 1/r-1 > t:
				cc.Improved = append(cc.Improved, m)
			}
		}
	}
	return c
}

// Regressions lists the cases flagged as regressed.
func (c Comparison) Regressions() []CaseChange {
	var out []CaseChange
	for _, cc := range c.Cases {
		if len(cc.Regressed) > 0 {
			out = append(out, cc)
		}
	}
	return out
}

// rel is a/b when both are positive numbers.
func rel(a, b float64) (float64, bool) {
	if !(a > 0) || !(b > 0) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return 0, false
	}
	return a / b, true
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// WriteComparison writes the comparison as Markdown: the rule with this pair's noise and thresholds,
// then one row per case with old → new and the change of each figure, then the cases only one run has.
func WriteComparison(w io.Writer, c Comparison) error {
	var b strings.Builder
	b.WriteString("# tunnelbench comparison\n\n")
	fmt.Fprintf(&b, "Old: %s. New: %s.\n\n", runLine(c.Old), runLine(c.New))
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

// WriteComparisonTable writes the comparison as an aligned text table, for the terminal.
func WriteComparisonTable(w io.Writer, c Comparison) error {
	if _, err := fmt.Fprintf(w, "%s\n\n", c.ruleText()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header, rows := c.rows()
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var err error
	if len(c.OnlyOld) > 0 {
		_, err = fmt.Fprintf(w, "only in the old run: %s\n", strings.Join(c.OnlyOld, ", "))
	}
	if len(c.OnlyNew) > 0 && err == nil {
		_, err = fmt.Fprintf(w, "only in the new run: %s\n", strings.Join(c.OnlyNew, ", "))
	}
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
		"A tunneled case is flagged when a ratio to direct worsened by more than max(%.0f%%, %g × noise): %s; "+
		"such a ratio is marked with !.",
		c.NoiseCases, strings.Join(noise, ", "), 100*CompareMinWorsening, CompareNoiseFactor, strings.Join(thr, ", "))
}

func (c Comparison) rows() (header []string, rows [][]string) {
	header = []string{"case", "p50 µs", "p99 µs", "calls/s", "MB/s", "p50 ×direct", "p99 ×direct", "calls/s ×direct", "bytes/s ×direct", "verdict"}
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
		rows = append(rows, append(row, verdict(cc)))
	}
	return header, rows
}

// changeCell is "old → new (+x%)".
func changeCell(format string, old, new float64) string {
	s := fmt.Sprintf(format+" → "+format, old, new)
	if r, ok := rel(new, old); ok {
		s += fmt.Sprintf(" (%+.1f%%)", 100*(r-1))
	}
	return s
}

func verdict(cc CaseChange) string {
	names := func(ms []Metric) string {
		var s []string
		for _, m := range ms {
			s = append(s, string(m)+" ×direct")
		}
		return strings.Join(s, ", ")
	}
	switch {
	case cc.Direct:
		return "baseline"
	case len(cc.Worsening) == 0:
		return "no ratio"
	case len(cc.Regressed) > 0 && len(cc.Improved) > 0:
		return "REGRESSED " + names(cc.Regressed) + "; improved " + names(cc.Improved)
	case len(cc.Regressed) > 0:
		return "REGRESSED " + names(cc.Regressed)
	case len(cc.Improved) > 0:
		return "improved " + names(cc.Improved)
	}
	return "within noise"
}
