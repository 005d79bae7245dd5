package plot

import (
	"image/color"
	"math"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
)

// Side-by-side chart sizes.
const (
	// widthPerBar is how wide the chart grows for each bar: a bar per tunnel in each case.
	widthPerBar = 0.35 * vg.Centimeter
	// legendLine is the share of the Y axis's top that each line of the legend takes.
	legendLine = 0.07
)

// TunnelsP50 draws each tunnel's p50 latency ÷ direct, case by case: a bar per tunnel, grouped by case.
func TunnelsP50(s *bench.Summary) (*Chart, error) {
	return tunnelRatios(s, "p50 latency ÷ direct by tunnel, same run", "p50 ×direct (lower is better)",
		func(r *bench.Ratio) float64 { return r.P50 })
}

// TunnelsCalls draws each tunnel's calls/s ÷ direct, case by case.
func TunnelsCalls(s *bench.Summary) (*Chart, error) {
	return tunnelRatios(s, "calls/s ÷ direct by tunnel, same run", "calls/s ×direct (higher is better)",
		func(r *bench.Ratio) float64 { return r.CallsPerSec })
}

// tunnelRatios draws one ratio of every tunnel but the baseline. A stalled case has no bar: the word
// "stalled" stands where it would be, never a number; so does "FAILED" for a failed case.
func tunnelRatios(s *bench.Summary, title, yLabel string, of func(*bench.Ratio) float64) (*Chart, error) {
	t := bench.SideBySideOf(s)
	var ss []series
	var marks [][]string
	for _, row := range t.Rows {
		if t.Tunnels[row] == tunnels.Direct {
			continue
		}
		sr := series{name: row}
		mk := make([]string, len(t.Columns))
		drawn := false
		for i, col := range t.Columns {
			v := math.NaN()
			switch c := t.Case(row, col); {
			case c == nil:
			case c.Stalled():
				mk[i], drawn = "stalled", true
			case c.Failed:
				mk[i], drawn = "FAILED", true
			case c.RatioToDirect != nil:
				v = of(c.RatioToDirect)
				drawn = true
			}
			sr.values = append(sr.values, v)
		}
		if drawn {
			ss, marks = append(ss, sr), append(marks, mk)
		}
	}
	if len(ss) == 0 {
		return nil, nil
	}
	width := max(DefaultWidth, vg.Length(len(t.Columns)*len(ss))*widthPerBar+6*vg.Centimeter)
	c := NewChart(title, "", yLabel, width)
	if err := bars(c, t.Columns, ss); err != nil {
		return nil, err
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Color = color.Gray{Y: 80}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	c.Add(one)
	c.Legend.Add("direct = 1", one)
	// Room above the tallest bar (and the line at 1) for the legend, a line per tunnel.
	top := 1.0
	for _, sr := range ss {
		for _, v := range sr.values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				top = max(top, v)
			}
		}
	}
	c.Y.Min, c.Y.Max = 0, top*(1.15+legendLine*float64(len(ss)+1))
	w := barWidth(c, len(t.Columns), len(ss))
	for i := range ss {
		if err := markLabels(c, marks[i], barOffset(i, len(ss), w)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// markLabels writes each category's mark (stalled, FAILED), upright, where its bar would stand.
func markLabels(c *Chart, marks []string, offset vg.Length) error {
	var xys plotter.XYs
	var labels []string
	for x, m := range marks {
		if m != "" {
			xys = append(xys, plotter.XY{X: float64(x), Y: 0})
			labels = append(labels, m)
		}
	}
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i] = text.Style{Color: color.Gray{Y: 60}, Font: c.X.Tick.Label.Font, Rotation: math.Pi / 2,
			XAlign: draw.XLeft, YAlign: draw.YCenter, Handler: c.X.Tick.Label.Handler}
	}
	l.Offset = vg.Point{X: offset, Y: vg.Points(3)}
	c.Add(l)
	return nil
}
