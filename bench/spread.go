package bench

import (
	"slices"

	"github.com/tunnelbench/tunnelbench/bench/load"
)

// roundOf is one round's figures.
func roundOf(r *load.Result) RoundResult {
	return RoundResult{
		Calls:       r.Calls,
		Errors:      r.Errors,
		CallsPerSec: r.CallsPerSecond(),
		BytesPerSec: r.BytesPerSecond(),
		P50us:       r.Quantile(50),
		P99us:       r.Quantile(99),
	}
}

// figures are the four compared figures of one round (or their ratios to direct), in Metrics order.
type figures [4]float64

func (r RoundResult) figures() figures {
	return figures{float64(r.P50us), float64(r.P99us), r.CallsPerSec, r.BytesPerSec}
}

// spreadOf is how much each figure moved over the rounds; nil for fewer than two.
func spreadOf(rounds []RoundResult) *Spread {
	fs := make([]figures, len(rounds))
	for i, r := range rounds {
		fs[i] = r.figures()
	}
	return spreadOfFigures(fs)
}

// ratioSpread is how much the ratios of a tunneled case to its direct pair moved, round by round (each
// round of the pair ran right before the case's same round); nil without two rounds in both.
func ratioSpread(c, direct []RoundResult) *Spread {
	n := min(len(c), len(direct))
	fs := make([]figures, n)
	for i := range n {
		t, d := c[i].figures(), direct[i].figures()
		for m := range fs[i] {
			if d[m] > 0 {
				fs[i][m] = t[m] / d[m]
			}
		}
	}
	return spreadOfFigures(fs)
}

func spreadOfFigures(fs []figures) *Spread {
	if len(fs) < 2 {
		return nil
	}
	var out figures
	vs := make([]float64, len(fs))
	for m := range out {
		for i, f := range fs {
			vs[i] = f[m]
		}
		out[m] = relRange(vs)
	}
	return &Spread{P50: out[0], P99: out[1], CallsPerSec: out[2], BytesPerSec: out[3]}
}

// relRange is (max − min) ÷ median of vs: 0 when the median is not positive (a figure that was zero,
// such as the calls/s of rounds whose calls all failed).
func relRange(vs []float64) float64 {
	m := median(vs)
	if !(m > 0) {
		return 0
	}
	return (slices.Max(vs) - slices.Min(vs)) / m
}

// of is the spread of metric m.
func (s *Spread) of(m Metric) float64 {
	switch m {
	case MetricP50:
		return s.P50
	case MetricP99:
		return s.P99
	case MetricCallsPerSec:
		return s.CallsPerSec
	default:
		return s.BytesPerSec
	}
}
