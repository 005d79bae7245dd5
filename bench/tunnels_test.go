package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/bench/tunnels"
	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/internal/golden"
)

// Test tunnels, added as a user adds theirs (bench/tunnels' package doc): registered by name, found by
// --tunnels. testDirect is direct gRPC behind the adapter interface (bench/tunnels' direct adapter);
// testFrozen is the same with an agent that never answers Echo, as a tunnel that stops moving data.
const (
	testDirect = "test-direct"
	testFrozen = "test-frozen"
)

func init() {
	direct, err := tunnels.Lookup(tunnels.Direct)
	if err != nil {
		panic(err)
	}
	tunnels.Register(tunnels.Registration{Name: testDirect, Kind: tunnels.KindPeer, About: "test: direct gRPC behind the adapter interface",
		Adapter: direct.Adapter})
	tunnels.Register(tunnels.Registration{Name: testFrozen, Kind: tunnels.KindPeer, About: "test: an agent that never answers Echo",
		Adapter: tunnels.StartFunc(func(ctx context.Context, cfg tunnels.Config) (tunnels.Tunnel, error) {
			cfg.Register = func(_ int64, s grpc.ServiceRegistrar) { demo.RegisterDemoServer(s, frozenDemo{}) }
			return direct.Adapter.Start(ctx, cfg)
		})})
}

// frozenDemo holds every Echo until its caller gives up.
type frozenDemo struct{ demo.Server }

func (frozenDemo) Echo(ctx context.Context, _ *demo.EchoRequest) (*demo.EchoResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// tunnelsSummary reads testdata/summary_tunnels.json: a --tunnels all --quick run cut to two cases,
// every tunnel on each, remotedialer stalled at 1 MiB × 16 and openconfig-grpctunnel failed at 64 B.
func tunnelsSummary(t *testing.T) *Summary { return readFixture(t, "summary_tunnels.json") }

// TestTunnelsReportGolden: report.md has one table per figure with a row per tunnel and a column per
// case, the idle costs, and the stall said plainly, with its dump, in words where a figure would be.
func TestTunnelsReportGolden(t *testing.T) {
	s := tunnelsSummary(t)
	var md, txt bytes.Buffer
	if err := WriteMarkdown(&md, s); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "report_tunnels.golden.md", md.Bytes())
	if err := WriteTable(&txt, s); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "table_tunnels.golden.txt", txt.Bytes())

	report := md.String()
	for _, want := range []string{"## Tunnels side by side", "### p50 latency ×direct", "### p99 latency ×direct", "### calls/s ×direct",
		"### bytes/s ×direct", "### CPU µs per call", "### Allocations per call", "### Idle cost per agent",
		"| tunnel | unary-64B/c1 | unary-1MiB/c16 |", "not a failure of the run",
		"results/peers/stalls/unary-1MiB_c16_remotedialer_round2.goroutines.txt"} {
		if !strings.Contains(report, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// In every figure's table, remotedialer's 1 MiB × 16 cell says stalled, never a number.
	rows := 0
	figures, _, _ := strings.Cut(report, "### Idle cost per agent")
	for line := range strings.Lines(figures) {
		if strings.HasPrefix(line, "| remotedialer | ") {
			rows++
			if cells := strings.Split(strings.TrimSpace(line), " | "); len(cells) < 3 || cells[2] != "stalled |" {
				t.Errorf("remotedialer row %q: want stalled at 1 MiB × 16", line)
			}
		}
	}
	if rows != len(tunnelFigures) {
		t.Errorf("%d remotedialer rows, want one per figure (%d)", rows, len(tunnelFigures))
	}
	if !strings.Contains(txt.String(), "unary-1MiB/c16/remotedialer: stalled in round 2") || !strings.Contains(txt.String(), "STALLED: 1 case of 16") {
		t.Errorf("the table does not say what stalled:\n%s", txt.String())
	}
	// A stall is not a failure: only the failed case fails the run.
	if f := s.Failures(); len(f) != 1 || !strings.HasPrefix(f[0], "unary-64B/c1/openconfig-grpctunnel: ") {
		t.Errorf("failures %q", f)
	}
}

// TestSideBySide: rows in run order (direct, this project's paths, the peers), a column per case, each
// row mapped to its tunnel.
func TestSideBySide(t *testing.T) {
	sb := SideBySideOf(tunnelsSummary(t))
	wantRows := []string{"direct", "tunnel", "tunnel-public", "tunnel-2hop", "tunnel-single-use", "jhump-grpctunnel", "openconfig-grpctunnel", "remotedialer"}
	if !slices.Equal(sb.Rows, wantRows) || !slices.Equal(sb.Columns, []string{"unary-64B/c1", "unary-1MiB/c16"}) {
		t.Fatalf("rows %q, columns %q", sb.Rows, sb.Columns)
	}
	if sb.Tunnels["tunnel-2hop"] != tunnels.Reuse || sb.Tunnels["direct"] != tunnels.Direct || sb.Tunnels["remotedialer"] != tunnels.Remotedialer {
		t.Errorf("tunnels %v", sb.Tunnels)
	}
	if c := sb.Case("remotedialer", "unary-1MiB/c16"); c == nil || !c.Stalled() {
		t.Errorf("remotedialer at 1 MiB × 16: %+v, want the stalled case", c)
	}
	if len(SideBySideOf(testSummary(t)).Rows) != 0 {
		t.Error("a v2 summary has no tunnels, but rows came out")
	}
}

// TestRunTunnelsWiring runs --tunnels with a test adapter (direct gRPC behind the adapter interface)
// through Config.Plan and Run, as tunnelbench bench does: its cases take turns with the direct baseline
// and get ratios, CPU time and allocations per call; this project's paths and the HTTP cases stay out,
// since the list does not name the tunnel; each tunnel's idle cost is measured.
func TestRunTunnelsWiring(t *testing.T) {
	c := DefaultConfig()
	c.Tunnels, c.Shapes, c.Concurrency, c.Scale = testDirect, "unary-64B,bidi-1KiB", "2", ScaleNone
	c.Warmup, c.Duration, c.Rounds = 50*time.Millisecond, 300*time.Millisecond, 2
	plan, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Options.Matrix.Paths, []Path{PathDirect}) || !slices.Equal(plan.Options.Matrix.Adapters, []string{testDirect}) ||
		plan.Options.HTTPRate != 0 || plan.Options.IdleAgents != tunnels.DefaultIdleAgents {
		t.Fatalf("plan %+v", plan.Options)
	}
	plan.Options.IdleAgents = 20 // a thousand is for figures; twenty show the wiring
	sum := tinyRun(t, plan.Options)
	dir := t.TempDir()
	if err := sum.WriteJSON(dir); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, filepath.Join(dir, "summary.json"))

	var names []string
	for _, cs := range sum.Cases {
		names = append(names, cs.Name)
		if cs.Calls == 0 || cs.Errors != 0 || cs.Failed || cs.Stalled() || cs.CPUusPerCall <= 0 || cs.AllocsPerCall <= 0 || len(cs.Rounds) != 2 {
			t.Errorf("%s: %d calls, %d errors, failed %v, stall %v, %.1f CPU µs and %.0f allocations per call, %d rounds",
				cs.Name, cs.Calls, cs.Errors, cs.Failed, cs.Stall, cs.CPUusPerCall, cs.AllocsPerCall, len(cs.Rounds))
		}
		if cs.Path == string(PathDirect) {
			if cs.Tunnel != tunnels.Direct || cs.RatioToDirect != nil {
				t.Errorf("%s: tunnel %q, ratio %v", cs.Name, cs.Tunnel, cs.RatioToDirect)
			}
			continue
		}
		if cs.Tunnel != testDirect || cs.Path != string(PathTunnel) || cs.Routing != nil || cs.RatioToDirect == nil || cs.RatioToDirect.P50 <= 0 || cs.RatioSpread == nil {
			t.Errorf("%s: tunnel %q, path %q, routing %v, ratio %v, ratio spread %v", cs.Name, cs.Tunnel, cs.Path, cs.Routing, cs.RatioToDirect, cs.RatioSpread)
		}
	}
	want := []string{"unary-64B/c2/direct", "unary-64B/c2/test-direct", "bidi-1KiB/c2/direct", "bidi-1KiB/c2/test-direct"}
	if !slices.Equal(names, want) {
		t.Fatalf("cases %q, want %q", names, want)
	}
	if len(sum.Tunnels) != 2 || sum.Tunnels[0].Name != tunnels.Direct || sum.Tunnels[1].Name != testDirect || sum.Tunnels[1].Kind != "peer" {
		t.Fatalf("tunnels %+v", sum.Tunnels)
	}
	for _, ti := range sum.Tunnels {
		if ti.Idle == nil || ti.Idle.Agents != 20 || ti.Idle.GoroutinesPerAgent < 1 || ti.Idle.HeapBytesPerAgent <= 0 || ti.Restarts != 0 {
			t.Errorf("%s: idle %+v, restarts %d", ti.Name, ti.Idle, ti.Restarts)
		}
	}
}

// TestRunTunnelStalls: a tunnel that stops answering under load makes each of its cases a stall with a
// goroutine dump, no figures and no ratio; the tunnel is restarted, the run goes on with the next case
// and the next group, and stalls are no failures of the run.
func TestRunTunnelStalls(t *testing.T) {
	c := DefaultConfig()
	c.Tunnels, c.Shapes, c.Concurrency, c.Scale = testDirect+","+testFrozen, "unary-64B", "1,2", ScaleNone
	c.Warmup, c.Duration, c.Rounds = 20*time.Millisecond, 200*time.Millisecond, 2
	plan, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	dumps := t.TempDir()
	plan.Options.IdleAgents = 0
	plan.Options.Watchdog = tunnels.Watchdog{StallAfter: 200 * time.Millisecond, DumpDir: dumps}
	sum := tinyRun(t, plan.Options)

	if len(sum.Cases) != 6 {
		t.Fatalf("%d cases, want 6 (two groups of direct, %s and %s)", len(sum.Cases), testDirect, testFrozen)
	}
	for _, cs := range sum.Cases {
		if cs.Tunnel != testFrozen {
			if cs.Stalled() || cs.Calls == 0 || cs.Errors != 0 {
				t.Errorf("%s: stall %v, %d calls, %d errors: the others must go on", cs.Name, cs.Stall, cs.Calls, cs.Errors)
			}
			continue
		}
		st := cs.Stall
		if st == nil || st.Round != 0 || st.Completed != 0 || st.Abandoned || cs.Calls != 0 || cs.RatioToDirect != nil || cs.Failed {
			t.Fatalf("%s: stall %+v, %d calls, ratio %v, failed %v; want a stall in the warm-up and nothing else", cs.Name, st, cs.Calls, cs.RatioToDirect, cs.Failed)
		}
		if want := filepath.Join(dumps, strings.ReplaceAll(cs.Name, "/", "_")+"_warmup.goroutines.txt"); st.DumpPath != want {
			t.Errorf("%s: dump %s, want %s", cs.Name, st.DumpPath, want)
		}
		dump, err := os.ReadFile(st.DumpPath)
		if err != nil || !strings.Contains(string(dump), "frozenDemo") {
			t.Errorf("%s: the dump does not show the frozen handler (%v)", cs.Name, err)
		}
	}
	if f, s := sum.Failures(), sum.Stalls(); len(f) != 0 || len(s) != 2 {
		t.Errorf("failures %q, stalls %q: want two stalls and no failure", f, s)
	}
	restarts := map[string]int{}
	for _, ti := range sum.Tunnels {
		restarts[ti.Name] = ti.Restarts
	}
	if restarts[testFrozen] != 2 || restarts[testDirect] != 0 {
		t.Errorf("restarts %v, want 2 for %s (after each stall), none for the others", restarts, testFrozen)
	}
}

// TestPlanTunnels: the default measures this project's modes on the default paths (the matrix of
// make bench unchanged) and the grpc-proxy reference as an adapter; all adds the peers as adapters; a list without this project's tunnel drops
// its paths and the HTTP cases; contradictions and unknown names name the flag.
func TestPlanTunnels(t *testing.T) {
	def, err := DefaultConfig().Plan()
	if err != nil {
		t.Fatal(err)
	}
	if m := def.Options.Matrix; !slices.Equal(m.Paths, DefaultMatrix().Paths) || !slices.Equal(m.Adapters, []string{tunnels.GRPCProxy}) || def.Options.HTTPRate != DefaultHTTPRate {
		t.Errorf("default: paths %v, adapters %v, HTTP %v", m.Paths, m.Adapters, def.Options.HTTPRate)
	}

	c := DefaultConfig()
	c.Tunnels, c.Quick = tunnels.AllList, true
	all, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for _, name := range tunnels.All() {
		if !isPathTunnel(name) {
			peers = append(peers, name)
		}
	}
	m := all.Options.Matrix
	if !slices.Equal(m.Paths, QuickMatrix().Paths) || !slices.Equal(m.Adapters, peers) || !slices.Contains(peers, tunnels.Remotedialer) {
		t.Errorf("all: paths %v, adapters %v, want the quick paths and %v", m.Paths, m.Adapters, peers)
	}
	if g := m.Groups()[0]; len(g.Cases()) != len(QuickMatrix().Paths)+len(peers) || g.Cases()[len(g.Cases())-1].Name() != "unary-64B/c1/"+peers[len(peers)-1] {
		t.Errorf("first group %+v", g.Cases())
	}

	c = DefaultConfig()
	c.Tunnels = "tunnel-single-use, " + tunnels.Remotedialer
	p, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if o := p.Options; !slices.Equal(o.Matrix.Paths, []Path{PathDirect, PathTunnelSingleUse}) || !slices.Equal(o.Matrix.Adapters, []string{tunnels.Remotedialer}) || o.HTTPRate != 0 {
		t.Errorf("single-use and remotedialer: paths %v, adapters %v, HTTP %v", o.Matrix.Paths, o.Matrix.Adapters, o.HTTPRate)
	}

	for _, tc := range []struct {
		cfg  func(*Config)
		want []string
	}{
		{func(c *Config) { c.Tunnels = "nope" }, []string{"--tunnels", `unknown tunnel "nope"`}},
		{func(c *Config) { c.Tunnels = "all,tunnel" }, []string{"--tunnels", "stands alone"}},
		{func(c *Config) { c.Tunnels, c.Paths = tunnels.Remotedialer, "direct,tunnel-public" },
			[]string{"--paths tunnel-public measures the tunnel tunnel, which --tunnels does not list"}},
		{func(c *Config) { c.Tunnels, c.Target = tunnels.AllList, "kas:8153" }, []string{"--tunnels", "not with --target or --processes"}},
		{func(c *Config) { c.Tunnels, c.Processes = tunnels.Remotedialer, true }, []string{"not with --target or --processes"}},
	} {
		c := DefaultConfig()
		tc.cfg(&c)
		_, err := c.Plan()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("--tunnels %q --paths %q: error %v, want it to say %q", c.Tunnels, c.Paths, err, w)
			}
		}
	}
}

// TestCompareReadsV2: --compare takes a v2 summary (results/baseline's schema before the tunnel
// dimension) and compares a v3 run with it case by case; the peers are new cases, and a case stalled
// in the new run is shown, not judged.
func TestCompareReadsV2(t *testing.T) {
	c := DefaultConfig()
	c.Compare = filepath.Join("testdata", "summary.json")
	p, err := c.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if p.Baseline == nil || p.Baseline.Schema != SummarySchemaV2 {
		t.Fatalf("baseline %+v", p.Baseline)
	}
	v3 := tunnelsSummary(t)
	cmp := Compare(p.Baseline, v3)
	if len(cmp.Cases) != 5 || !slices.Contains(cmp.OnlyNew, "unary-1MiB/c16/remotedialer") || len(cmp.OnlyOld) != 0 {
		t.Errorf("compared %d cases, only new %q, only old %q", len(cmp.Cases), cmp.OnlyNew, cmp.OnlyOld)
	}
	// The same v3 run against itself with remotedialer's stall in the old run only: not judged.
	old := tunnelsSummary(t)
	for i := range v3.Cases {
		if v3.Cases[i].Stalled() {
			v3.Cases[i] = old.Cases[i-1]
			v3.Cases[i].Name = old.Cases[i].Name
		}
	}
	cmp = Compare(old, v3)
	for _, cc := range cmp.Cases {
		if cc.Name == "unary-1MiB/c16/remotedialer" && (!cc.OldStalled || len(cc.Regressed)+len(cc.Improved) > 0 || cmp.verdict(cc) != "stalled in the old run") {
			t.Errorf("%s: old stalled %v, verdict %q", cc.Name, cc.OldStalled, cmp.verdict(cc))
		}
	}
	if !strings.Contains(cmp.VerdictText(), "Not judged, stalled in a run: unary-1MiB/c16/remotedialer.") {
		t.Errorf("verdict %q does not name the stalled case", cmp.VerdictText())
	}
}

// TestMergeStalls: a case that stalled on one load host is stalled in the merge (the others' figures
// would be part of the load only), with that host's dump, where its results were gathered; the other
// cases merge as before.
func TestMergeStalls(t *testing.T) {
	runs := inputs(synthRuns(t))
	stalled := &runs[1].Summary.Cases[1]
	stalled.Stall = &StallResult{Round: 1, AfterS: 10, Completed: 3, DumpPath: "results/latest/stalls/x.goroutines.txt"}
	stalled.LatencyHDR, stalled.Calls = "", 0
	sum, err := Merge(runs)
	if err != nil {
		t.Fatal(err)
	}
	c := sum.Cases[1]
	if !c.Stalled() || c.RatioToDirect != nil || c.Stall.DumpPath != filepath.Join("host-b", StallDir, "x.goroutines.txt") {
		t.Errorf("merged %s: stall %+v, ratio %v", c.Name, c.Stall, c.RatioToDirect)
	}
	if d := sum.Cases[0]; d.Stalled() || d.Calls == 0 {
		t.Errorf("merged %s: stall %v, %d calls", d.Name, d.Stall, d.Calls)
	}
	if stalled.Stall.DumpPath != "results/latest/stalls/x.goroutines.txt" {
		t.Errorf("merge changed its input's stall: %+v", stalled.Stall)
	}

	// The tunnels of the runs must be the same; their idle costs (each host's) may differ.
	runs = inputs(synthRuns(t))
	for i, r := range runs {
		r.Summary.Tunnels = []TunnelInfo{{Name: tunnels.Direct, Idle: &tunnels.IdleCost{Agents: 10, HeapBytesPerAgent: float64(1000 + i)}},
			{Name: tunnels.Reuse, Restarts: i}}
	}
	if sum, err = Merge(runs); err != nil {
		t.Fatal(err)
	}
	if got := sum.Tunnels; len(got) != 2 || got[0].Idle != nil || got[1].Restarts != 3 {
		t.Errorf("merged tunnels %+v: want both, without idle costs, restarts summed", got)
	}
	runs[2].Summary.Tunnels = runs[2].Summary.Tunnels[:1]
	if _, err := Merge(runs); err == nil || !strings.Contains(err.Error(), "tunnels direct,tunnel vs direct") {
		t.Errorf("runs of other tunnels merged: %v", err)
	}
}

// TestMergeReadsOlderSchemas: tunnelbench merge reads v2 and v1 summaries as it reads v3 ones.
func TestMergeReadsOlderSchemas(t *testing.T) {
	runs, err := ReadMergeInputs([]string{filepath.Join("testdata", "summary.json"), filepath.Join("testdata", "summary_v1.json"),
		filepath.Join("testdata", "summary_tunnels.json")})
	if err != nil {
		t.Fatal(err)
	}
	var schemas []string
	for _, r := range runs {
		schemas = append(schemas, r.Summary.Schema)
	}
	if !slices.Equal(schemas, []string{SummarySchemaV2, SummarySchemaV1, SummarySchema}) {
		t.Errorf("schemas %q", schemas)
	}
	if _, err := ReadSummary(filepath.Join("testdata", "compare.golden.json")); err == nil || !strings.Contains(err.Error(), `want "`+SummarySchema+`"`) {
		t.Errorf("a compare.json read as a summary: %v, want an error naming the schema", err)
	}
}
