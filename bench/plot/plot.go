// Package plot draws a benchmark summary (bench.Summary) as charts: latency percentiles per case,
// ratios to direct, routing durations and scale curves, written as SVG (or PNG, PDF).
//
// It only reads summaries; it never runs anything and never changes the summary.
package plot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/tunnelbench/tunnelbench/bench"
)

// Plot sizes: a chart is at least DefaultWidth wide and grows by WidthPerCase for each case on its
// X axis, so that every case name stays readable.
const (
	DefaultWidth  = 24 * vg.Centimeter
	DefaultHeight = 14 * vg.Centimeter
	WidthPerCase  = 0.7 * vg.Centimeter
)

// Format is an output format: the file extension gonum/plot writes.
type Format string

// Formats.
const (
	SVG Format = "svg"
	PNG Format = "png"
	PDF Format = "pdf"
)

// Figure is one chart made from a summary.
type Figure struct {
	// Name is the file name, without extension.
	Name string
	// Make draws the chart; a nil chart means the summary has nothing to draw for it.
	Make func(s *bench.Summary) (*Chart, error)
}

// Chart is a gonum plot with the width it needs.
type Chart struct {
	*gplot.Plot
	Width vg.Length
}

// Figures lists every chart WriteAll writes, in order.
var Figures = []Figure{
	{Name: "latency", Make: Latency},
	{Name: "ratio", Make: Ratios},
	{Name: "tunnels-p50", Make: TunnelsP50},
	{Name: "tunnels-calls", Make: TunnelsCalls},
	{Name: "routing", Make: Routing},
	{Name: "routing-histogram", Make: RoutingHistogramOf},
	{Name: "scale-heap", Make: ScaleHeap},
	{Name: "scale-goroutines", Make: ScaleGoroutines},
	{Name: "scale-connect", Make: ScaleConnect},
}

// WriteAll writes every chart the summary has data for into dir as SVG and returns the files written.
func WriteAll(dir string, s *bench.Summary) ([]string, error) {
	return Write(dir, s, SVG)
}

// Write writes every chart the summary has data for into dir, once per format, and returns the files
// written, in Figures order.
func Write(dir string, s *bench.Summary, formats ...Format) ([]string, error) {
	if s == nil {
		return nil, errors.New("plot: no summary")
	}
	for _, f := range formats {
		if !slices.Contains([]Format{SVG, PNG, PDF}, f) {
			return nil, fmt.Errorf("plot: unknown format %q (want svg, png or pdf)", f)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	var files []string
	for _, fig := range Figures {
		c, err := fig.Make(s)
		if errors.Is(err, errNothingToDraw) {
			continue
		}
		if err != nil {
			return files, fmt.Errorf("plot %s: %w", fig.Name, err)
		}
		if c == nil {
			continue
		}
		for _, f := range formats {
			path := filepath.Join(dir, fig.Name+"."+string(f))
			if err := c.WriteFile(path, f); err != nil {
				return files, fmt.Errorf("plot %s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	return files, nil
}

// Encode writes the chart in format f, DefaultHeight high. SVG names font fallbacks (SVGFontFamily).
func (c *Chart) Encode(w io.Writer, f Format) error {
	wt, err := c.WriterTo(c.Width, DefaultHeight, string(f))
	if err != nil {
		return err
	}
	if f != SVG {
		_, err = wt.WriteTo(w)
		return err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return err
	}
	_, err = w.Write(withFontFallbacks(b.Bytes()))
	return err
}

// WriteFile writes the chart to path in format f. gonum panics on data it cannot draw (a log axis
// without positive values, say): that becomes an error, and the partly written file is removed, so that
// a bad chart costs its file, never the run's results.
func (c *Chart) WriteFile(path string, f Format) (err error) {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cannot draw: %v", r)
		}
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	return c.Encode(file, f)
}

// newChart is a titled plot, wide enough for n cases on its X axis.
func newChart(title, xLabel, yLabel string, n int) *Chart {
	return NewChart(title, xLabel, yLabel, max(DefaultWidth, vg.Length(n)*WidthPerCase+6*vg.Centimeter))
}

// NewChart is a chart in this package's style: a title, axis labels, the legend at the top and
// horizontal grid lines, width wide.
func NewChart(title, xLabel, yLabel string, width vg.Length) *Chart {
	p := gplot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	useChartFont(p)
	p.Add(gridY())
	return &Chart{Plot: p, Width: width}
}
