package runner

import (
	"image/color"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	benchplot "github.com/tunnelbench/tunnelbench/bench/plot"
)

// plotFaultColors are the faults' hues, one per fault name in order of first appearance; bands are
// drawn translucent, instant faults as dashed lines at full strength. None is among the series' dark
// colors.
var plotFaultColors = []color.NRGBA{
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // cyan
	{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, // pink
	{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff}, // olive
	{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
}

// plotBandAlpha is how opaque a fault's band is: light enough to read the data through.
const plotBandAlpha = 0x38

// plotFaultMark is one fault window on a time chart: a band from x0 to x1 across the whole height, or
// a vertical line when the fault is instant (x0 == x1). It has no data range, so it never moves the
// axes.
type plotFaultMark struct {
	x0, x1 float64
	hue    color.NRGBA
}

func (m plotFaultMark) band() color.Color {
	h := m.hue
	h.A = plotBandAlpha
	return h
}

func (m plotFaultMark) line() draw.LineStyle {
	return draw.LineStyle{Color: m.hue, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}
}

// Plot implements gplot.Plotter.
func (m plotFaultMark) Plot(c draw.Canvas, p *gplot.Plot) {
	x0, x1 := max(m.x0, p.X.Min), min(m.x1, p.X.Max)
	if x1 < x0 {
		return
	}
	trX, _ := p.Transforms(&c)
	l, r := trX(x0), trX(x1)
	if m.x1 > m.x0 {
		c.FillPolygon(m.band(), []vg.Point{{X: l, Y: c.Min.Y}, {X: r, Y: c.Min.Y}, {X: r, Y: c.Max.Y}, {X: l, Y: c.Max.Y}})
		return
	}
	c.StrokeLine2(m.line(), l, c.Min.Y, l, c.Max.Y)
}

// Thumbnail implements gplot.Thumbnailer, for the legend.
func (m plotFaultMark) Thumbnail(c *draw.Canvas) {
	if m.x1 > m.x0 {
		c.FillPolygon(m.band(), []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}})
		return
	}
	x := (c.Min.X + c.Max.X) / 2
	c.StrokeLine2(m.line(), x, c.Min.Y, x, c.Max.Y)
}

// plotFaultLegend holds one legend entry per fault name, added after the data series.
type plotFaultLegend struct {
	names []string
	marks []plotFaultMark
}

// plotAddFaults adds a mark per fault window to the chart (before the data, so behind it) and returns
// their legend entries. A window that ends before it starts, or is not a number, is left out.
func plotAddFaults(c *benchplot.Chart, s *Summary) *plotFaultLegend {
	leg := &plotFaultLegend{}
	hues := map[string]color.NRGBA{}
	for _, f := range s.Faults {
		if math.IsNaN(f.StartS) || math.IsNaN(f.EndS) || math.IsInf(f.StartS, 0) || math.IsInf(f.EndS, 0) || f.EndS < f.StartS {
			continue
		}
		hue, seen := hues[f.Name]
		if !seen {
			hue = plotFaultColors[len(hues)%len(plotFaultColors)]
			hues[f.Name] = hue
		}
		m := plotFaultMark{x0: f.StartS, x1: f.EndS, hue: hue}
		c.Add(m)
		if !seen {
			leg.names = append(leg.names, "fault: "+f.Name)
			leg.marks = append(leg.marks, m)
		}
	}
	return leg
}

func (l *plotFaultLegend) addTo(c *benchplot.Chart) {
	for i, name := range l.names {
		c.Legend.Add(name, l.marks[i])
	}
}
