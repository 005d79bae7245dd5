package plot

import (
	"errors"
	"image/color"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one named set of values, one per category (NaN: no value).
type series struct {
	name   string
	values []float64
}

func gridY() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color = nil
	g.Horizontal.Color = color.Gray{Y: 220}
	return g
}

// categoryAxis names the X positions 0..n-1, turns the names so that long case names fit and leaves
// half a category of room at either end.
func categoryAxis(p *gplot.Plot, names []string) {
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 2.5
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
}

// headroom raises the top of the Y axis so that the legend, top right, stays clear of the data.
func headroom(c *Chart) {
	if _, log := c.Y.Scale.(gplot.LogScale); log {
		// Start at a power of ten, so that the axis has a label at its foot.
		c.Y.Min = math.Pow(10, math.Floor(math.Log10(c.Y.Min)))
		c.Y.Max *= 4
		return
	}
	c.Y.Max *= 1.3
}

// points draws each series as markers over the categories on a logarithmic Y axis: values of very
// different sizes (a 64 B call and a 1 MiB call) stay readable. Non-positive values are left out.
func points(c *Chart, names []string, ss []series) error {
	categoryAxis(c.Plot, names)
	c.Y.Scale = gplot.LogScale{}
	c.Y.Tick.Marker = gplot.LogTicks{Prec: -1}
	drawn := false
	for i, s := range ss {
		var xys plotter.XYs
		for x, v := range s.values {
			if v > 0 && !math.IsInf(v, 0) {
				xys = append(xys, plotter.XY{X: float64(x), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: SeriesColor(i), Radius: vg.Points(4), Shape: plotutil.Shape(i)}
		c.Add(sc)
		c.Legend.Add(s.name, sc)
		drawn = true
	}
	if !drawn {
		return errNothingToDraw // a log axis without a positive value cannot be drawn
	}
	headroom(c)
	return nil
}

// errNothingToDraw: the chart has no value it can show; Write skips it.
var errNothingToDraw = errors.New("nothing to draw")

// bars draws the series as groups of bars, one group per category, on a linear Y axis.
func bars(c *Chart, names []string, ss []series) error {
	categoryAxis(c.Plot, names)
	w := barWidth(c, len(names), len(ss))
	for i, s := range ss {
		vs := make(plotter.Values, len(s.values))
		for j, v := range s.values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				vs[j] = v
			}
		}
		b, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return err
		}
		b.Color = SeriesColor(i)
		b.LineStyle.Width = 0
		b.Offset = barOffset(i, len(ss), w)
		c.Add(b)
		c.Legend.Add(s.name, b)
	}
	headroom(c)
	return nil
}

// barWidth is the width of each of n series' bars over categories: the plotting area is the chart
// less about 3 cm of axis, and bars fill 70% of a category.
func barWidth(c *Chart, categories, n int) vg.Length {
	perCase := (c.Width - 3*vg.Centimeter) / vg.Length(categories)
	return min(vg.Centimeter, perCase*0.7/vg.Length(n))
}

// barOffset is how far series i's bars sit from their category's centre.
func barOffset(i, n int, w vg.Length) vg.Length {
	return (vg.Length(i) - vg.Length(n-1)/2) * w
}

// lines draws each series against xs, with markers, on a log X axis when xs spans a factor of 10 or
// more (scale steps usually grow tenfold).
func lines(c *Chart, xs []float64, ss []series) error {
	lo, hi := minMax(xs)
	logX := lo > 0 && hi/lo >= 10
	if logX {
		c.X.Scale = gplot.LogScale{}
		c.X.Tick.Marker = gplot.LogTicks{Prec: -1}
	}
	for i, s := range ss {
		var xys plotter.XYs
		for j, v := range s.values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) && xs[j] > 0 {
				xys = append(xys, plotter.XY{X: xs[j], Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color = SeriesColor(i)
		sc.GlyphStyle = draw.GlyphStyle{Color: SeriesColor(i), Radius: vg.Points(3), Shape: plotutil.Shape(i)}
		c.Add(l, sc)
		c.Legend.Add(s.name, l, sc)
	}
	c.Y.Min = 0
	headroom(c)
	if logX {
		c.X.Min, c.X.Max = lo/1.25, hi*1.25
	} else if hi > lo {
		c.X.Min, c.X.Max = lo-(hi-lo)/20, hi+(hi-lo)/20
	}
	return nil
}

func minMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi = xs[0], xs[0]
	for _, x := range xs[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
