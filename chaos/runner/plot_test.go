package runner

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	benchplot "github.com/tunnelbench/tunnelbench/bench/plot"
	"github.com/tunnelbench/tunnelbench/internal/golden"
	"github.com/tunnelbench/tunnelbench/internal/svgtext"
)

// plotTitles is the start of each figure's title.
var plotTitles = map[string]string{
	"latency":           "Call latency per second",
	"rate":              "Calls per second: offered, achieved (succeeded) and failed",
	"errors":            "Failed calls per second, by gRPC code",
	"routing":           "Slow routings per second: % of routings above 16ms and 64ms",
	"routing-histogram": "Routing duration histogram",
	"tunnels":           "Tunnels idle and busy",
	"connections":       "New agent connections per second",
}

func renderPlot(t *testing.T, fig PlotFigure, s *Summary) []byte {
	t.Helper()
	c, err := plotMake(fig, s)
	if err != nil {
		t.Fatalf("%s: %v", fig.Name, err)
	}
	if c == nil {
		t.Fatalf("%s: nothing drawn", fig.Name)
	}
	var b bytes.Buffer
	if err := c.Encode(&b, benchplot.SVG); err != nil {
		t.Fatalf("%s: %v", fig.Name, err)
	}
	return b.Bytes()
}

// windowSummary is the fixture with two more faults that last a while (one of them twice), to show
// the shaded bands next to the kill's line.
func windowSummary(t *testing.T) *Summary {
	s := testChaosSummary(t)
	s.Faults = append(s.Faults,
		FaultWindow{Name: "latency agent->kas (fraction 0.2)", StartS: 20, EndS: 25.5},
		FaultWindow{Name: "link-down kas->redis", StartS: 30, EndS: 32},
		FaultWindow{Name: "latency agent->kas (fraction 0.2)", StartS: 34, EndS: 38})
	return s
}

// TestPlotGoldenSVG: gonum's SVG output is deterministic (checked by drawing twice), so every chart of
// the fixture, and the latency chart with fault bands, is compared byte for byte with
// testdata/plot-NAME.golden.svg.
func TestPlotGoldenSVG(t *testing.T) {
	type variant struct {
		name string
		fig  PlotFigure
		s    *Summary
	}
	var vs []variant
	for _, fig := range PlotFigures {
		vs = append(vs, variant{fig.Name, fig, testChaosSummary(t)})
	}
	vs = append(vs, variant{"latency-bands", PlotFigure{Name: "latency", Make: PlotLatency}, windowSummary(t)})
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			got := renderPlot(t, v.fig, v.s)
			if again := renderPlot(t, v.fig, v.s); !bytes.Equal(got, again) {
				t.Fatal("two drawings of the same summary differ: SVG output is not deterministic")
			}
			golden.Compare(t, "plot-"+v.name+".golden.svg", got)
		})
	}
}

// TestWritePlots: every chart of the fixture is written, parses as SVG, carries its title, and the
// time charts name the fault in their legend.
func TestWritePlots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	files, err := WritePlots(dir, testChaosSummary(t))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, fig := range PlotFigures {
		want = append(want, filepath.Join(dir, fig.Name+".svg"))
	}
	if !slices.Equal(files, want) {
		t.Fatalf("wrote %v, want %v", files, want)
	}
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
		name := strings.TrimSuffix(filepath.Base(f), ".svg")
		title := plotTitles[name]
		if !slices.ContainsFunc(texts, func(s string) bool { return strings.HasPrefix(s, title) }) {
			t.Errorf("%s: no title %q among %q", f, title, texts)
		}
		if fault := slices.Contains(texts, "fault: kill-kas (kas 1)"); fault != (name != "routing-histogram") {
			t.Errorf("%s: fault in the legend: %v", f, fault)
		}
	}
}

// TestPlotFaultLegend: a fault name that recurs has one legend entry; every window is drawn.
func TestPlotFaultLegend(t *testing.T) {
	s := windowSummary(t)
	texts, err := svgtext.Texts(renderPlot(t, PlotFigure{Name: "rate", Make: PlotRate}, s))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fault: kill-kas (kas 1)", "fault: latency agent->kas (fraction 0.2)", "fault: link-down kas->redis"} {
		if n := count(texts, name); n != 1 {
			t.Errorf("legend has %q %d times, want once", name, n)
		}
	}
	// Each band is filled with its fault's hue, translucent: three bands (the kill is a line).
	if n := bytes.Count(renderPlot(t, PlotFigure{Name: "rate", Make: PlotRate}, s), []byte("fill-opacity")); n < 3 {
		t.Errorf("%d translucent fills, want a band per window (3) and their legend keys", n)
	}
}

func count(ss []string, s string) (n int) {
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// TestPlotsSkipMissingData: a chart is written only when the run has its data: no errors chart for a
// run without failures, no connections chart without new connections, no routing charts without
// routings.
func TestPlotsSkipMissingData(t *testing.T) {
	s := passedSummary(t)
	s.Routing = Routing{}
	for i := range s.Timeline {
		sec := &s.Timeline[i]
		sec.OK, sec.ByCode, sec.NewConnections, sec.RoutingCounts = sec.Achieved, nil, 0, nil
	}
	files, err := WritePlots(t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".svg"))
	}
	if want := []string{"latency", "rate", "tunnels"}; !slices.Equal(names, want) {
		t.Errorf("wrote %v, want %v", names, want)
	}
}

// TestPlotRoutingTimeouts: a second in which every routing timed out reads 100% slow, and timeouts get
// their own line.
func TestPlotRoutingTimeouts(t *testing.T) {
	s := testChaosSummary(t)
	s.Timeline[11].RoutingCounts = make([]uint64, len(s.Routing.BucketBoundsS)+1)
	s.Timeline[11].RoutingTimeouts = 40
	c, err := PlotRouting(s)
	if err != nil {
		t.Fatal(err)
	}
	if c.Y.Max < 100 {
		t.Errorf("Y axis ends at %v: the second of timeouts is not drawn as 100%% slow", c.Y.Max)
	}
	var b bytes.Buffer
	if err := c.Encode(&b, benchplot.SVG); err != nil {
		t.Fatal(err)
	}
	texts, _ := svgtext.Texts(b.Bytes())
	if !slices.Contains(texts, "timed out") {
		t.Errorf("no timed-out line among %q", texts)
	}
}

// TestPlotsNeverPanic: data gonum cannot draw, or that makes no sense, costs at most its own chart:
// WritePlots returns (it does not panic) and writes the charts it can.
func TestPlotsNeverPanic(t *testing.T) {
	cases := map[string]func(s *Summary){
		"zero latencies": func(s *Summary) {
			for i := range s.Timeline {
				s.Timeline[i].LatencyUs = Second{}.LatencyUs
			}
		},
		"negative counts": func(s *Summary) {
			for i := range s.Timeline {
				s.Timeline[i].Offered, s.Timeline[i].TunnelsIdle, s.Timeline[i].RoutingTimeouts = -5, -1, -3
			}
		},
		"malformed routing second": func(s *Summary) { s.Timeline[3].RoutingCounts = []uint64{1} },
		"malformed routing run":    func(s *Summary) { s.Routing.BucketCounts = []uint64{1, 2} },
		"no bucket bounds":         func(s *Summary) { s.Routing.BucketBoundsS = nil },
		"odd faults": func(s *Summary) {
			s.Faults = append(s.Faults, FaultWindow{Name: "backwards", StartS: 5, EndS: 2}, FaultWindow{Name: "nan", StartS: math.NaN(), EndS: 3},
				FaultWindow{Name: "inf", StartS: 1, EndS: math.Inf(1)}, FaultWindow{Name: "late", StartS: 900, EndS: 1000}, FaultWindow{Name: "early", StartS: -10, EndS: 1})
		},
		"faults without timeline": func(s *Summary) { s.Timeline = nil },
		"gaps and unordered seconds": func(s *Summary) {
			s.Timeline = append(s.Timeline[30:], s.Timeline[:20]...)
			s.Timeline[5].Achieved = 0
		},
		"one second": func(s *Summary) { s.Timeline = s.Timeline[:1] },
		"huge latency": func(s *Summary) {
			s.Timeline[0].LatencyUs.P99 = math.MaxInt64
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			s := testChaosSummary(t)
			mutate(s)
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			files, err := WritePlots(t.TempDir(), s)
			for _, f := range files {
				if _, serr := os.Stat(f); serr != nil {
					t.Errorf("listed %s: %v", f, serr)
				}
			}
			t.Logf("wrote %d files, err %v", len(files), err)
			var md bytes.Buffer
			if err := WriteMarkdown(&md, s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPlotsErrorCostsOneChart: a malformed routing second fails the routing chart only, with an error
// that says which second; the other charts are written and no partial file is left.
func TestPlotsErrorCostsOneChart(t *testing.T) {
	s := testChaosSummary(t)
	s.Timeline[3].RoutingCounts = []uint64{1}
	dir := t.TempDir()
	files, err := WritePlots(dir, s)
	if err == nil || !strings.Contains(err.Error(), "plot routing: second 3: 1 routing counts for 8 bucket bounds") {
		t.Fatalf("error %v, want one about second 3's routing counts", err)
	}
	if len(files) != len(PlotFigures)-1 {
		t.Errorf("wrote %v, want every chart but routing", files)
	}
	if _, err := os.Stat(filepath.Join(dir, "routing.svg")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("routing.svg: %v, want no file", err)
	}
	if _, err := WritePlots(dir, nil); err == nil {
		t.Error("nil summary accepted")
	}
}

// TestPlotWriteRecovers: a gonum panic while encoding becomes an error and removes the file.
func TestPlotWriteRecovers(t *testing.T) {
	c, err := PlotRate(testChaosSummary(t))
	if err != nil {
		t.Fatal(err)
	}
	c.Y.Scale = nil // gonum dereferences it while drawing
	path := filepath.Join(t.TempDir(), "bad.svg")
	if err := c.WriteFile(path, benchplot.SVG); err == nil || !strings.Contains(err.Error(), "cannot draw") {
		t.Fatalf("error %v, want cannot draw", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind: %v", path, err)
	}
	fig := PlotFigure{Name: "boom", Make: func(*Summary) (*benchplot.Chart, error) { panic("boom") }}
	if _, err := plotMake(fig, &Summary{}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a panic in Make: %v", err)
	}
}
