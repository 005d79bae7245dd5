package plot

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/internal/golden"
	"github.com/tunnelbench/tunnelbench/internal/svgtext"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testSummary is the bench package's fixture: five cases (three with ratios and routing) and three
// scale steps.
func testSummary(t *testing.T) *bench.Summary {
	t.Helper()
	s, err := bench.ReadSummary(filepath.Join("..", "testdata", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tunnelsSummary is the bench package's fixture of a --tunnels all run: every tunnel on two cases, a
// stalled case, a failed one, idle costs.
func tunnelsSummary(t *testing.T) *bench.Summary {
	t.Helper()
	s, err := bench.ReadSummary(filepath.Join("..", "testdata", "summary_tunnels.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tunnelFigures are the charts of the tunnel dimension (schema v3), which the v2 fixture has nothing for.
var tunnelFigures = map[string]bool{"tunnels-p50": true, "tunnels-calls": true}

// fixtureFor is the fixture a chart is drawn from in the tests: the --tunnels one for the tunnel charts.
func fixtureFor(t *testing.T, fig Figure) *bench.Summary {
	if tunnelFigures[fig.Name] {
		return tunnelsSummary(t)
	}
	return testSummary(t)
}

var titles = map[string]string{
	"latency":          "Latency per case",
	"ratio":            "Tunnel ÷ direct, same run",
	"tunnels-p50":      "p50 latency ÷ direct by tunnel, same run",
	"tunnels-calls":    "calls/s ÷ direct by tunnel, same run",
	"routing":          "Routing duration per case",
	"scale-heap":       "Heap per tunnel",
	"scale-goroutines": "kas goroutines per tunnel",
	"scale-connect":    "Time to connect every tunnel",
}

func render(t *testing.T, fig Figure, s *bench.Summary, f Format) []byte {
	t.Helper()
	c, err := fig.Make(s)
	if err != nil {
		t.Fatalf("%s: %v", fig.Name, err)
	}
	if c == nil {
		t.Fatalf("%s: nothing drawn", fig.Name)
	}
	var b bytes.Buffer
	if err := c.Encode(&b, f); err != nil {
		t.Fatalf("%s: %v", fig.Name, err)
	}
	return b.Bytes()
}

// TestGoldenSVG: gonum's SVG output is deterministic (checked by drawing twice), so every chart of the
// fixture is compared byte for byte with testdata/NAME.golden.svg.
func TestGoldenSVG(t *testing.T) {
	for _, fig := range Figures {
		t.Run(fig.Name, func(t *testing.T) {
			s := fixtureFor(t, fig)
			got := render(t, fig, s, SVG)
			if again := render(t, fig, s, SVG); !bytes.Equal(got, again) {
				t.Fatal("two drawings of the same summary differ: SVG output is not deterministic")
			}
			golden.Compare(t, fig.Name+".golden.svg", got)
		})
	}
}

// TestWriteAll: every chart is written, parses as SVG and carries its title.
func TestWriteAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	files, err := WriteAll(dir, testSummary(t))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, fig := range Figures {
		if !tunnelFigures[fig.Name] {
			want = append(want, filepath.Join(dir, fig.Name+".svg"))
		}
	}
	if !slices.Equal(files, want) {
		t.Fatalf("wrote %v, want %v (no tunnel charts for a summary without tunnels)", files, want)
	}
	tunnelFiles, err := WriteAll(filepath.Join(t.TempDir(), "plots"), tunnelsSummary(t))
	if err != nil {
		t.Fatal(err)
	}
	for name := range tunnelFigures {
		if !slices.ContainsFunc(tunnelFiles, func(f string) bool { return filepath.Base(f) == name+".svg" }) {
			t.Errorf("the --tunnels fixture did not get %s.svg: %v", name, tunnelFiles)
		}
	}
	files = append(files, tunnelFiles...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts, err := svgtext.Texts(b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		title := titles[strings.TrimSuffix(filepath.Base(f), ".svg")]
		if !slices.ContainsFunc(texts, func(s string) bool { return strings.HasPrefix(s, title) }) {
			t.Errorf("%s: no title %q among %q", f, title, texts)
		}
	}
}

// TestWritePNGAndPDF: the PNG files decode and have a plausible size; the PDF files are PDF.
func TestWritePNGAndPDF(t *testing.T) {
	s := testSummary(t)
	s.Scale = nil
	files, err := Write(t.TempDir(), s, PNG, PDF)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 8 {
		t.Fatalf("wrote %v, want latency, ratio, routing and routing-histogram, each as PNG and PDF", files)
	}
	for _, f := range files {
		if filepath.Ext(f) == ".pdf" {
			if b, err := os.ReadFile(f); err != nil || !bytes.HasPrefix(b, []byte("%PDF-")) {
				t.Errorf("%s: not a PDF (%v)", f, err)
			}
			continue
		}
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 300 {
			t.Errorf("%s: %v pixels", f, b)
		}
	}
}

// TestWriteSkipsMissingData: a chart is written only when the summary has its data.
func TestWriteSkipsMissingData(t *testing.T) {
	s := testSummary(t)
	var direct []bench.CaseResult
	for _, c := range s.Cases {
		if c.Path == "direct" {
			direct = append(direct, c)
		}
	}
	s.Cases, s.Scale = direct, nil
	files, err := WriteAll(t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || filepath.Base(files[0]) != "latency.svg" {
		t.Errorf("wrote %v, want latency.svg only", files)
	}
	files, err = WriteAll(t.TempDir(), &bench.Summary{Schema: bench.SummarySchema})
	if err != nil || len(files) != 0 {
		t.Errorf("empty summary: wrote %v, %v", files, err)
	}
}

// TestZeroValues: zeros (a case with no calls, a routing histogram with no samples) do not break the
// log scales.
func TestZeroValues(t *testing.T) {
	s := testSummary(t)
	s.Cases[0].Latency = bench.Latency{}
	s.Cases[1].Routing.P50us = 0
	s.Cases[1].RatioToDirect = &bench.Ratio{}
	s.Scale[0].ConnectS = 0
	if _, err := Write(t.TempDir(), s, SVG); err != nil {
		t.Fatal(err)
	}
}

// TestManyCasesWiden: the default matrix's 45 cases get a wider chart.
func TestManyCasesWiden(t *testing.T) {
	s := testSummary(t)
	for len(s.Cases) < 45 {
		c := s.Cases[len(s.Cases)%5]
		c.Name = fmt.Sprintf("%s-%d", c.Name, len(s.Cases))
		s.Cases = append(s.Cases, c)
	}
	c, err := Latency(s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Width <= DefaultWidth {
		t.Errorf("width %v for 45 cases, want more than %v", c.Width, DefaultWidth)
	}
}

func TestWriteErrors(t *testing.T) {
	if _, err := WriteAll(t.TempDir(), nil); err == nil {
		t.Error("nil summary accepted")
	}
	if _, err := Write(t.TempDir(), testSummary(t), "gif"); err == nil {
		t.Error("unknown format accepted")
	}
}

// TestRoutingHistogram: the bucket chart for when the summary carries routing buckets.
func TestRoutingHistogram(t *testing.T) {
	bounds := []float64{0.001, 0.004, 0.016, 0.064, 0.256, 1.024, 4.096, 16.384}
	c, err := RoutingHistogram([]RoutingBuckets{
		{Case: "unary-64B/c1/tunnel", BoundsS: bounds, Counts: []uint64{900, 80, 15, 5, 0, 0, 0, 0, 0}},
		{Case: "unary-1MiB/c16/tunnel", BoundsS: bounds, Counts: []uint64{0, 0, 0, 0, 0, 0, 0, 0, 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := c.Encode(&b, SVG); err != nil {
		t.Fatal(err)
	}
	texts, err := svgtext.Texts(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Routing duration histogram", "≤ 1ms", "1ms – 4ms", "4.096s – 16.384s", "> 16.384s"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no %q among %q", want, texts)
		}
	}
	if _, err := RoutingHistogram([]RoutingBuckets{{Case: "bad", BoundsS: bounds, Counts: []uint64{1}}}); err == nil {
		t.Error("mismatched buckets accepted")
	}
}

// TestNothingToDrawIsSkipped: a summary whose routing figures are all zero (a --target run without
// metrics) writes the other charts and skips the routing one, without a panic.
func TestNothingToDrawIsSkipped(t *testing.T) {
	s := testSummary(t)
	for i := range s.Cases {
		if s.Cases[i].Routing != nil {
			s.Cases[i].Routing = &bench.Routing{}
		}
	}
	files, err := WriteAll(t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "/routing.svg") {
			t.Fatalf("an empty routing chart was written: %v", files)
		}
	}
}
