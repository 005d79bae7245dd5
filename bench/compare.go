package bench

import (
	"math"
	"slices"
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
	// OldName and NewName say where the runs' summaries are, for the reports (optional).
	OldName, NewName string
	// Refused lists how the two runs measured differently (machine or settings): their figures are
	// still shown side by side, but no case is judged. Warnings are differences that do not stop the
	// comparison but may move figures (see comparability).
	Refused, Warnings []string
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
	// Spread is, per metric, the larger of the two runs' spreads over rounds of what is judged: the
	// ratio to direct for a tunneled case, the figure itself for a direct one. Absent for runs of one
	// round (and v1 runs, which did not record rounds).
	Spread map[Metric]float64
	// Failed says that the case failed in the old or the new run (CaseResult.Failed, or errors in a v1
	// run): its figures describe errors, so it is not judged.
	OldFailed, NewFailed bool
	// Stalled says that the case stalled in the old or the new run (CaseResult.Stall): it has no
	// figures, so it is not judged.
	OldStalled, NewStalled bool
	// Regressed and Improved list the metrics whose ratio moved beyond the threshold and the spread.
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
// With no direct case in both runs the noise is unknown and CompareMinWorsening alone applies. A ratio
// must also have moved by more than its spread over rounds in either run (CaseChange.Spread): a change
// the rounds of one run already span is not a change between runs.
//
// Nothing is judged when the runs measured differently (Comparison.Refused), and a case that failed or
// stalled in either run is not judged either.
func Compare(old, new *Summary) Comparison {
	c := Comparison{Old: old.Env, New: new.Env, Noise: map[Metric]float64{}, Threshold: map[Metric]float64{}}
	c.Refused, c.Warnings = comparability(old, new)
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
		c.Cases = append(c.Cases, CaseChange{Name: n.Name, Direct: n.Path == string(PathDirect), Old: *o, New: *n,
			Spread: maxSpread(*o, *n), OldFailed: failedIn(old, o), NewFailed: failedIn(new, n),
			OldStalled: o.Stalled(), NewStalled: n.Stalled()})
	}
	for _, o := range old.Cases {
		if !seen[o.Name] {
			c.OnlyOld = append(c.OnlyOld, o.Name)
		}
	}

	moves := map[Metric][]float64{}
	for _, cc := range c.Cases {
		if !cc.Direct || !cc.judgeable() {
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
		if cc.Direct || cc.Old.RatioToDirect == nil || cc.New.RatioToDirect == nil || !cc.judgeable() {
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
			if len(c.Refused) > 0 {
				continue
			}
			switch t := max(c.Threshold[m], cc.Spread[m]); {
			case r-1 > t:
				cc.Regressed = append(cc.Regressed, m)
			case 1/r-1 > t:
				cc.Improved = append(cc.Improved, m)
			}
		}
	}
	return c
}

// judgeable says whether both runs have figures of the case that describe it: it neither failed nor
// stalled in either.
func (cc CaseChange) judgeable() bool {
	return !cc.OldFailed && !cc.NewFailed && !cc.OldStalled && !cc.NewStalled
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

// Improvements lists the cases flagged as improved.
func (c Comparison) Improvements() []CaseChange {
	var out []CaseChange
	for _, cc := range c.Cases {
		if len(cc.Improved) > 0 {
			out = append(out, cc)
		}
	}
	return out
}

// maxSpread is, per metric, the larger spread over rounds of the two runs of a case: of its ratios to
// direct for a tunneled case, of its figures for a direct one; nil when neither run has rounds.
func maxSpread(o, n CaseResult) map[Metric]float64 {
	pick := func(c CaseResult) *Spread {
		if c.Path == string(PathDirect) || c.Path == string(PathHTTPDirect) {
			return c.Spread
		}
		return c.RatioSpread
	}
	so, sn := pick(o), pick(n)
	if so == nil && sn == nil {
		return nil
	}
	out := map[Metric]float64{}
	for _, m := range Metrics {
		for _, s := range []*Spread{so, sn} {
			if s != nil {
				out[m] = max(out[m], s.of(m))
			}
		}
	}
	return out
}

// failedIn says whether case c of run s failed: as marked, or, in a v1 run that did not mark failures,
// with any error.
func failedIn(s *Summary, c *CaseResult) bool {
	if s.Schema == SummarySchemaV1 {
		return c.Errors > 0 || c.Calls == 0
	}
	return c.Failed
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
