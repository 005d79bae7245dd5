package runner

// Charts of one scenario run over time, with the faults shaded, drawn with gonum/plot as bench/plot
// draws the benchmark. Like the reports, they only read the Summary; a chart that cannot be drawn
// costs its own file, never the others and never a panic.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	benchplot "github.com/tunnelbench/tunnelbench/bench/plot"
)

// PlotWidthPerSecond widens a chart of a long run beyond bench/plot's DefaultWidth, so that a second
// stays wide enough to see (a 60-s run keeps the default width).
const PlotWidthPerSecond = 0.15 * vg.Centimeter

// PlotMaxWidth caps that growth (at about 13 minutes of run).
const PlotMaxWidth = 120 * vg.Centimeter

// PlotFigure is one chart of a run.
type PlotFigure struct {
	// Name is the file name, without extension.
	Name string
	// Make draws the chart; a nil chart (or errPlotNothingToDraw) means the run has no data for it.
	Make func(s *Summary) (*benchplot.Chart, error)
	// KasOnly: the chart shows what kas measures, which a run against another tunnel (Summary.Tunnel)
	// does not have.
	KasOnly bool
}

// PlotFigures lists every chart WritePlots writes, in order.
var PlotFigures = []PlotFigure{
	{Name: "latency", Make: PlotLatency},
	{Name: "rate", Make: PlotRate},
	{Name: "errors", Make: PlotErrors},
	{Name: "routing", Make: PlotRouting, KasOnly: true},
	{Name: "routing-histogram", Make: PlotRoutingHistogram, KasOnly: true},
	{Name: "tunnels", Make: PlotTunnels, KasOnly: true},
	{Name: "connections", Make: PlotConnections},
}

// errPlotNothingToDraw: the chart has no value it can show; WritePlots skips it.
var errPlotNothingToDraw = errors.New("nothing to draw")

// WritePlots writes every chart the run has data for into dir as SVG (dir/NAME.svg) and returns the
// files written, in PlotFigures order; a run against another tunnel has no kas charts. A chart that fails is left out and its error joined to the
// others; the other charts are still written.
func WritePlots(dir string, s *Summary) ([]string, error) {
	if s == nil {
		return nil, errors.New("plot: no summary")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	var (
		files []string
		errs  []error
	)
	for _, fig := range PlotFigures {
		if fig.KasOnly && s.Tunnel != "" {
			continue
		}
		c, err := plotMake(fig, s)
		if errors.Is(err, errPlotNothingToDraw) || err == nil && c == nil {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("plot %s: %w", fig.Name, err))
			continue
		}
		path := filepath.Join(dir, fig.Name+".svg")
		if err := c.WriteFile(path, benchplot.SVG); err != nil {
			errs = append(errs, fmt.Errorf("plot %s: %w", path, err))
			continue
		}
		files = append(files, path)
	}
	return files, errors.Join(errs...)
}

// plotMake draws one figure, turning a gonum panic into an error.
func plotMake(fig PlotFigure, s *Summary) (c *benchplot.Chart, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("cannot draw: %v", r)
		}
	}()
	return fig.Make(s)
}

// plotTimeChart is a titled chart over the run's seconds, with the faults shaded behind the data
// (they are added first, so drawn first).
func plotTimeChart(s *Summary, title, yLabel string) (*benchplot.Chart, *plotFaultLegend) {
	start, end := plotSpan(s)
	width := min(max(benchplot.DefaultWidth, vg.Length(end-start)*PlotWidthPerSecond+4*vg.Centimeter), PlotMaxWidth)
	c := benchplot.NewChart(title, "seconds since the load started", yLabel, width)
	return c, plotAddFaults(c, s)
}

// plotSpan is the X axis: the seconds of the timeline, from 0 (or an earlier second) to the end of
// the last one. Faults outside it are cut off: the charts show the load.
func plotSpan(s *Summary) (start, end float64) {
	end = 1
	for _, sec := range s.Timeline {
		start, end = min(start, float64(sec.T)), max(end, float64(sec.T+1))
	}
	return start, end
}

// plotFinish fixes the axes once the data is in: X over the timeline, Y from 0 to above the data,
// leaving room at the top for the legend (series entries plus the faults'); then it adds the faults to
// the legend, after the series.
func plotFinish(c *benchplot.Chart, s *Summary, faults *plotFaultLegend, top float64, entries int) {
	c.X.Min, c.X.Max = plotSpan(s)
	c.X.Tick.Marker = plotTicks{}
	c.Y.Tick.Marker = plotTicks{}
	c.Y.Min, c.Y.Max = 0, max(top, 1)/(1-plotLegendShare(c, entries+len(faults.names)))
	faults.addTo(c)
}

// plotLegendShare is about how much of the plotting area's height, from the top, a legend of n
// entries covers, with a margin; at most 60%.
func plotLegendShare(c *benchplot.Chart, n int) float64 {
	area := benchplot.DefaultHeight - 3*vg.Centimeter // less the title and the X axis
	legend := vg.Length(n)*c.Legend.TextStyle.Font.Size*1.25 + vg.Points(8)
	return min(float64(legend/area), 0.6)
}

// plotTicks labels a linear axis every 1, 2 or 5 times a power of ten, about six times over, with no
// more decimals than the step needs (gonum's default labels 0 and 250 as "0.00" and "250.00").
type plotTicks struct{}

// Ticks implements gplot.Ticker.
func (plotTicks) Ticks(lo, hi float64) []gplot.Tick {
	span := hi - lo
	if !(span > 0) || math.IsInf(span, 0) {
		return nil
	}
	raw := span / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	decimals := max(0, -int(math.Floor(math.Log10(step))))
	var ticks []gplot.Tick
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9 && len(ticks) < 100; k++ {
		v := k * step
		ticks = append(ticks, gplot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	return ticks
}

// plotSeries is one named line: a value per second of the timeline (NaN: none that second).
type plotSeries struct {
	name   string
	values []float64
}

// plotSteps draws each series as steps, the value of second T held from T to T+1, which is what a
// per-second count or percentile is. A second without a value, a value keep rejects, or a second
// missing from the timeline leaves a gap. The first series is drawn last, on top, so that where
// series coincide (offered and achieved in a quiet second) the first shows; the legend keeps their
// order. It returns the largest value drawn and how many series were drawn (each has a legend entry).
func plotSteps(c *benchplot.Chart, s *Summary, ss []plotSeries, keep func(float64) bool) (top float64, drawn int, err error) {
	legend := make([]*plotter.Line, len(ss))
	for i := len(ss) - 1; i >= 0; i-- {
		var seg plotter.XYs
		flush := func() error {
			if len(seg) == 0 {
				return nil
			}
			last := seg[len(seg)-1]
			seg = append(seg, plotter.XY{X: last.X + 1, Y: last.Y})
			l, err := plotter.NewLine(seg)
			if err != nil {
				return err
			}
			l.StepStyle = plotter.PostStep
			l.Color = benchplot.SeriesColor(i)
			l.Width = vg.Points(1.5)
			c.Add(l)
			legend[i] = l
			seg = nil
			return nil
		}
		for j, sec := range s.Timeline {
			if j >= len(ss[i].values) {
				break
			}
			v := ss[i].values[j]
			ok := !math.IsNaN(v) && !math.IsInf(v, 0) && keep(v)
			if len(seg) > 0 && (!ok || float64(sec.T) != seg[len(seg)-1].X+1) {
				if err := flush(); err != nil {
					return 0, 0, err
				}
			}
			if ok {
				seg = append(seg, plotter.XY{X: float64(sec.T), Y: v})
				top = max(top, v)
			}
		}
		if err := flush(); err != nil {
			return 0, 0, err
		}
	}
	for i, l := range legend {
		if l != nil {
			c.Legend.Add(ss[i].name, l)
			drawn++
		}
	}
	return top, drawn, nil
}

func plotAny(float64) bool { return true }

func plotPositive(v float64) bool { return v > 0 }
