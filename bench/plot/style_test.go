package plot

import (
	"fmt"
	"image/color"
	"regexp"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/bench"
)

// TestSeriesColorsDistinct: the first 256 series colours are all different, opaque, and none is a grey
// (axes, grid lines and the ratio chart's "direct = 1" line are black or grey).
func TestSeriesColorsDistinct(t *testing.T) {
	seen := map[color.RGBA]int{}
	for i := range 256 {
		c := color.RGBAModel.Convert(SeriesColor(i)).(color.RGBA)
		if c.A != 255 {
			t.Errorf("series %d: %v is not opaque", i, c)
		}
		if c.R == c.G && c.G == c.B {
			t.Errorf("series %d: %v is a grey", i, c)
		}
		if j, ok := seen[c]; ok {
			t.Errorf("series %d and %d share %v", j, i, c)
		}
		seen[c] = i
	}
}

// svgColour finds the colours an SVG paints with.
var svgColour = regexp.MustCompile(`(?:fill|stroke):(#[0-9A-Fa-f]{6})`)

// seriesColours are the colours of an SVG that are not greys (black, white and grid grey included):
// the series' colours.
func seriesColours(svg []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range svgColour.FindAllSubmatch(svg, -1) {
		h := strings.ToUpper(string(m[1]))
		if h[1:3] == h[3:5] && h[3:5] == h[5:7] {
			continue
		}
		out[h] = true
	}
	return out
}

// manySeries is the fixture with twelve tunneled cases at its top concurrency, so that the routing
// histogram has more series than gonum's seven-colour palette.
func manySeries(t *testing.T) *bench.Summary {
	t.Helper()
	s := testSummary(t)
	var top bench.CaseResult
	for _, c := range s.Cases {
		if c.Routing != nil && c.Concurrency == 16 {
			top = c
		}
	}
	for i := range 11 {
		c := top
		c.Name = fmt.Sprintf("%s-%d", top.Name, i)
		s.Cases = append(s.Cases, c)
	}
	return s
}

// TestEverySeriesOwnColour: in every chart, each series is drawn in a colour of its own, so the SVG
// holds exactly as many series colours as the chart has series.
func TestEverySeriesOwnColour(t *testing.T) {
	s := manySeries(t)
	series := map[string]int{
		"latency":           3, // p50, p90, p99
		"ratio":             2, // latency and calls/s ratios
		"routing":           2, // p50, p99
		"routing-histogram": 12,
		"scale-heap":        2, // kas, agents
		"scale-goroutines":  1,
		"scale-connect":     1,
		// tunnel, tunnel-public, tunnel-2hop, tunnel-single-use and three peers.
		"tunnels-p50":   7,
		"tunnels-calls": 7,
	}
	for _, fig := range Figures {
		t.Run(fig.Name, func(t *testing.T) {
			want, ok := series[fig.Name]
			if !ok {
				t.Fatalf("no series count for %s: add it here", fig.Name)
			}
			fs := s
			if tunnelFigures[fig.Name] {
				fs = tunnelsSummary(t)
			}
			got := seriesColours(render(t, fig, fs, SVG))
			if len(got) != want {
				t.Errorf("%d series colours %v, want %d (one per series)", len(got), got, want)
			}
		})
	}
}

var svgFontFamilies = regexp.MustCompile(`font-family:([^;"]*)`)

// TestSVGFontFallback: every text of every SVG chart names the fallback list, ending in the generic
// sans-serif family, so that a viewer without Liberation Sans still draws it in a sans-serif font.
func TestSVGFontFallback(t *testing.T) {
	if !strings.HasSuffix(SVGFontFamily, ", sans-serif") {
		t.Fatalf("SVGFontFamily %q does not end in the generic family", SVGFontFamily)
	}
	for _, fig := range Figures {
		svg := render(t, fig, fixtureFor(t, fig), SVG)
		families := svgFontFamilies.FindAllSubmatch(svg, -1)
		if len(families) == 0 {
			t.Errorf("%s: no font-family", fig.Name)
		}
		for _, f := range families {
			if string(f[1]) != SVGFontFamily {
				t.Errorf("%s: font-family %q, want %q", fig.Name, f[1], SVGFontFamily)
				break
			}
		}
	}
}
