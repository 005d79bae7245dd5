package plot

import (
	"bytes"
	"image/color"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
)

// chartFont is the face charts are laid out with: gonum's embedded Liberation Sans, whose metrics match
// Arial's, so that a viewer that substitutes Arial (or Helvetica) keeps every label where it was placed.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// SVGFontFamily is the font-family every SVG chart names. gonum writes only the embedded face's name,
// and a viewer without Liberation Sans then picks its default font, often a serif one that overflows
// the labels; the fallbacks end in the generic family, which every viewer has.
const SVGFontFamily = "'Liberation Sans', Arial, Helvetica, 'DejaVu Sans', sans-serif"

// svgFontFamily is what gonum writes for chartFont (its family name, from the font file).
const svgFontFamily = "font-family:Liberation Sans;"

// useChartFont sets every text of p in chartFont, keeping each text's size.
func useChartFont(p *gplot.Plot) {
	for _, s := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		s.Font = font.From(chartFont, s.Font.Size)
	}
}

// withFontFallbacks names SVGFontFamily wherever gonum named the embedded face alone.
func withFontFallbacks(svg []byte) []byte {
	return bytes.ReplaceAll(svg, []byte(svgFontFamily), []byte("font-family:"+SVGFontFamily+";"))
}

// palette is the series colours, readable on white and in print, told apart by hue first: gonum's dark
// palette, then five more of similar weight.
var palette = append(append([]color.Color{}, plotutil.DarkColors...),
	color.RGBA{0, 128, 128, 255},  // teal
	color.RGBA{128, 128, 0, 255},  // olive
	color.RGBA{140, 86, 75, 255},  // brown
	color.RGBA{0, 0, 128, 255},    // navy
	color.RGBA{214, 39, 140, 255}, // pink
)

// goldenAngle spreads the hues of colours past the palette: consecutive ones are far apart, and no hue
// comes back.
const goldenAngle = 137.50776405003785

// SeriesColor is the colour of a chart's i-th series (from 0). Every series of a chart gets its own:
// the palette first, then hues spread by the golden angle at three lightnesses, distinct from each
// other and from the palette for as many series as a chart can hold.
func SeriesColor(i int) color.Color {
	if i < 0 {
		i = -i
	}
	if i < len(palette) {
		return palette[i]
	}
	k := i - len(palette)
	hue := math.Mod(20+float64(k)*goldenAngle, 360)
	value := []float64{0.55, 0.75, 0.40}[k%3]
	return hsv(hue, 0.8, value)
}

// hsv converts a hue in degrees, a saturation and a value in [0, 1] to an opaque colour.
func hsv(h, s, v float64) color.RGBA {
	c := v * s
	x := c * (1 - math.Abs(math.Mod(h/60, 2)-1))
	m := v - c
	var r, g, b float64
	switch {
	case h < 60:
		r, g, b = c, x, 0
	case h < 120:
		r, g, b = x, c, 0
	case h < 180:
		r, g, b = 0, c, x
	case h < 240:
		r, g, b = 0, x, c
	case h < 300:
		r, g, b = x, 0, c
	default:
		r, g, b = c, 0, x
	}
	u8 := func(f float64) uint8 { return uint8(math.Round((f + m) * 255)) }
	return color.RGBA{u8(r), u8(g), u8(b), 255}
}
