package plot

import (
	"image/color"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/tunnelbench/tunnelbench/bench"
)

// Ratios draws each tunneled case's p50 latency and calls/s as ratios to its direct pair: 1 is the
// cost of nothing, a latency ratio of 2 is twice as slow, a calls/s ratio of 0.5 half the throughput.
func Ratios(s *bench.Summary) (*Chart, error) {
	var names []string
	p50, calls := series{name: "p50 latency ×direct (lower is better)"}, series{name: "calls/s ×direct (higher is better)"}
	for _, c := range s.Cases {
		if c.RatioToDirect == nil {
			continue
		}
		names = append(names, c.Name)
		p50.values = append(p50.values, c.RatioToDirect.P50)
		calls.values = append(calls.values, c.RatioToDirect.CallsPerSec)
	}
	if len(names) == 0 {
		return nil, nil
	}
	c := newChart("Tunnel ÷ direct, same run", "", "ratio to direct", len(names))
	if err := bars(c, names, []series{p50, calls}); err != nil {
		return nil, err
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Color = color.Gray{Y: 80}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	c.Add(one)
	c.Legend.Add("direct = 1", one)
	c.Y.Min, c.Y.Max = 0, max(c.Y.Max, 1.3)
	return c, nil
}
