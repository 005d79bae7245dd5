package bench

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/load"
)

// TestPlanDefaults: no flags is the default matrix, durations, rounds and scale steps; --quick the
// quick ones.
func TestPlanDefaults(t *testing.T) {
	p, err := DefaultConfig().Plan()
	if err != nil {
		t.Fatal(err)
	}
	o := p.Options
	if o.Warmup != DefaultWarmup || o.Duration != DefaultDuration || o.Rounds != DefaultRounds || o.HTTPRate != DefaultHTTPRate ||
		o.Topology.Transport != TransportTCP || len(o.Matrix.Groups()) != len(DefaultMatrix().Groups()) ||
		!slices.Equal(p.ScaleSteps, DefaultScaleSteps) || p.Baseline != nil {
		t.Errorf("default plan %+v", p)
	}

	c := DefaultConfig()
	c.Quick = true
	if p, err = c.Plan(); err != nil {
		t.Fatal(err)
	}
	if p.Options.Warmup != QuickWarmup || p.Options.Duration != QuickDuration || !slices.Equal(p.ScaleSteps, QuickScaleSteps) ||
		len(p.Options.Matrix.Groups()) != len(QuickMatrix().Groups()) {
		t.Errorf("quick plan %+v", p)
	}
	c.Warmup, c.Duration = 50*time.Millisecond, 2*time.Second
	if p, err = c.Plan(); err != nil || p.Options.Warmup != c.Warmup || p.Options.Duration != c.Duration {
		t.Errorf("set durations: %+v, %v", p.Options, err)
	}
}

// TestPlanAxes: the lists replace the matrix's axes, the filter keeps the direct pairs, and --scale
// none skips the scale case.
func TestPlanAxes(t *testing.T) {
	c := DefaultConfig()
	c.Paths, c.Shapes, c.Concurrency, c.Cases, c.Scale = "direct, tunnel", "unary-64B,sleep", "1,8", "unary.*tunnel$", ScaleNone
	p, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	m := p.Options.Matrix
	if !slices.Equal(m.Paths, []Path{PathDirect, PathTunnel}) || !slices.Equal(m.Concurrency, []int{1, 8}) ||
		!slices.Equal(m.Shapes, []ShapeSpec{{load.ShapeUnary, 64}, {Shape: load.ShapeSleep}}) || p.ScaleSteps != nil {
		t.Errorf("plan %+v, scale %v", m, p.ScaleSteps)
	}
	if g := m.Groups(); len(g) != 2 || !slices.Equal(g[0].Paths, []Path{PathDirect, PathTunnel}) {
		t.Errorf("groups %+v, want unary-64B at c1 and c8 with their direct pairs", g)
	}
	c.Scale = "20, 40"
	if p, err = c.Plan(); err != nil || !slices.Equal(p.ScaleSteps, []int{20, 40}) {
		t.Errorf("scale %v, %v", p.ScaleSteps, err)
	}
}

// TestPlanTopologies: --processes and --target choose their paths; --target runs no HTTP or scale case
// and no direct case without --target-direct.
func TestPlanTopologies(t *testing.T) {
	c := DefaultConfig()
	c.Processes = true
	p, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if !p.Options.Topology.Processes || !slices.Equal(p.Options.Matrix.Paths, []Path{PathDirect, PathTunnelPublic, PathTunnel2Hop}) {
		t.Errorf("processes: %+v", p.Options)
	}
	c = DefaultConfig()
	c.Target, c.TargetAgent, c.TargetMetrics = "kas:8150", 7, "http://kas:8151/metrics"
	if p, err = c.Plan(); err != nil {
		t.Fatal(err)
	}
	o := p.Options
	if o.Topology.Target != c.Target || o.Topology.TargetMetrics != c.TargetMetrics || o.AgentID != 7 || o.HTTPRate != 0 ||
		p.ScaleSteps != nil || !o.Matrix.NoDirect || !slices.Equal(o.Matrix.Paths, []Path{PathDirect, PathTunnelPublic}) {
		t.Errorf("target: %+v, scale %v", o, p.ScaleSteps)
	}
}

// TestPlanErrors: every problem is reported at once, each naming its flag.
func TestPlanErrors(t *testing.T) {
	c := DefaultConfig()
	c.Shapes, c.Paths, c.Concurrency, c.Cases = "unary-xyz", "nowhere", "x,0", "("
	c.Rounds, c.Warmup, c.Duration, c.HTTPRate, c.Transport = 0, -time.Second, -time.Second, -1, "pigeon"
	c.Scale, c.Compare, c.Target, c.Processes = "abc", filepath.Join(t.TempDir(), "none"), "kas:1", true
	_, err := c.Plan()
	if err == nil {
		t.Fatal("no error")
	}
	for _, flag := range []string{"--shapes", "--paths", `--concurrency: "x"`, "--concurrency: 0", "--cases", "--rounds", "--warmup",
		"--duration", "--http-rate", "--transport", "--scale", "--compare", "--target and --processes"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("the error does not name %s:\n%v", flag, err)
		}
	}
	c = DefaultConfig()
	c.Cases = "nomatch-at-all"
	if _, err := c.Plan(); err == nil || err.Error() != `no case matches --cases "nomatch-at-all"` {
		t.Errorf("no case: %v", err)
	}
}

// TestPlanCompare: --compare reads the baseline.
func TestPlanCompare(t *testing.T) {
	dir := t.TempDir()
	if err := (&Summary{Schema: SummarySchema}).WriteJSON(dir); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Compare = dir
	if p, err := c.Plan(); err != nil || p.Baseline == nil {
		t.Errorf("baseline %v, %v", p.Baseline, err)
	}
}

// TestOptionsValidate: a library caller's options are checked as the flags are; zero rounds is one.
func TestOptionsValidate(t *testing.T) {
	ok := Options{Matrix: QuickMatrix(), Duration: time.Second}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
	bad := Options{Matrix: Matrix{Paths: []Path{PathDirect}, Shapes: QuickMatrix().Shapes, Concurrency: []int{0}}, Rounds: 101,
		Topology: TopologyConfig{Target: "kas:1", Processes: true}}
	err := bad.Validate()
	for _, flag := range []string{"--concurrency", "--duration", "--rounds", "--target"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("the error does not name %s: %v", flag, err)
		}
	}
	if err := (Options{Matrix: Matrix{}, Duration: time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "no case matches") {
		t.Errorf("empty matrix: %v", err)
	}
}
