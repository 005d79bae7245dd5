package dashboards_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/core/agentk"
	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// findTimeout is short, so that a call for an unknown agent times out quickly and counts a routing
// timeout.
const findTimeout = 300 * time.Millisecond

// unknownAgent has no tunnel: calls for it time out.
const unknownAgent = 99

// env is everything whose metrics the dashboards show, live in this process: a kas with an agent from
// the harness topology, an agentk process (as a library) connected to the same kas, and the harness
// metrics. The component names are the scrape jobs of prometheus.yml.
type env struct {
	topo    *bench.Topology
	agentk  *agentk.Agentk
	harness *metrics.Provider
	hm      *harnessmetrics.Metrics
	demo    demo.DemoClient
}

// startEnv starts the environment; cleanup stops it.
func startEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	topo, err := bench.StartTopology(ctx, bench.TopologyConfig{Kas: 1, Agents: 1, TunnelsPerAgent: 2, FindTimeout: findTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		topo.Close(ctx)
	})
	// agentk serves agent 1 too: kas spreads agent 1's calls over both agents' tunnels. Its tunnels are
	// single-use (an agent of the protocol's first version): they end with their calls, so the panels
	// of ended tunnels see data within the test's few seconds.
	ak, err := agentk.New(agentk.Config{
		KasAddress:    topo.Kas[0].Addrs().Agent.String(),
		Token:         bench.AgentToken(1),
		MetricsListen: "127.0.0.1:0",
		Pool:          tunclient.Config{MinIdle: 1, SingleUse: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ak.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ak.Stop(ctx)
	})
	eventually(t, 10*time.Second, func() bool { return ak.Agent().Stats().Idle >= 1 }, "agentk has no idle tunnel")

	hp, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hp.Shutdown(context.Background()) })
	hm, err := harnessmetrics.New(hp)
	if err != nil {
		t.Fatal(err)
	}
	return &env{topo: topo, agentk: ak, harness: hp, hm: hm, demo: demo.NewDemoClient(topo.Tunnel(0, true))}
}

// call makes one routed Echo call for agentID through kas's public API, bounded by a few seconds.
func (e *env) call(ctx context.Context, agentID int64) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, rpc.RoutingAgentIDMetadataKey, fmt.Sprint(agentID))
	_, err := e.demo.Echo(ctx, &demo.EchoRequest{Message: "dashboards"})
	return err
}

// callAndRecord makes a call and records it in the harness metrics as the load generator would.
func (e *env) callAndRecord(ctx context.Context, scenario string, agentID int64) error {
	e.hm.Offered(scenario, 1)
	start := time.Now()
	err := e.call(ctx, agentID)
	e.hm.Call(scenario, time.Since(start), status.Code(err))
	return err
}

// timeoutCall makes a call for an agent that has no tunnel and checks that it timed out.
func (e *env) timeoutCall(t *testing.T, ctx context.Context, scenario string) {
	t.Helper()
	if err := e.callAndRecord(ctx, scenario, unknownAgent); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call for an unknown agent: %v, want DeadlineExceeded", err)
	}
}

// families gathers every component's metric families: component -> family name -> family.
func (e *env) families(t *testing.T) map[string]map[string]*dto.MetricFamily {
	t.Helper()
	out := map[string]map[string]*dto.MetricFamily{
		"kas":         testenv.Scrape(t, e.topo.Metrics[0]),
		"agentk":      scrape(t, "http://"+e.agentk.MetricsAddr().String()+"/metrics"),
		"tunnelbench": testenv.Scrape(t, e.harness),
	}
	return out
}

// scrape reads a /metrics endpoint in the text format, as Prometheus would.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return mfs
}

// family is a metric family as the golden file records it.
type family struct {
	name, typ  string
	components []string
}

func (f family) String() string {
	return f.name + " " + f.typ + " " + strings.Join(f.components, ",")
}

// typeNames are the golden file's type names.
var typeNames = map[dto.MetricType]string{
	dto.MetricType_COUNTER:         "counter",
	dto.MetricType_GAUGE:           "gauge",
	dto.MetricType_HISTOGRAM:       "histogram",
	dto.MetricType_GAUGE_HISTOGRAM: "gaugehistogram",
	dto.MetricType_SUMMARY:         "summary",
	dto.MetricType_UNTYPED:         "untyped",
}

// resolve finds the family a queried name belongs to: the family itself, or the histogram (or summary)
// whose _bucket, _sum or _count series it is. typeOf returns the type of a family name, "" if none.
func resolve(name string, typeOf func(string) string) (string, bool) {
	if typeOf(name) != "" {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch typeOf(base) {
		case "histogram":
			return base, true
		case "summary":
			return base, suffix != "_bucket"
		}
	}
	return "", false
}

// liveFamilies is the families a set of queried names belong to, with their types and the components
// exposing them; names no component exposes are returned apart.
func liveFamilies(names []string, fams map[string]map[string]*dto.MetricFamily) (found []family, missing []string) {
	typeOf := func(name string) string {
		for _, comp := range fams {
			if mf, ok := comp[name]; ok {
				return typeNames[mf.GetType()]
			}
		}
		return ""
	}
	seen := map[string]bool{}
	for _, n := range names {
		base, ok := resolve(n, typeOf)
		if !ok {
			missing = append(missing, n)
			continue
		}
		if seen[base] {
			continue
		}
		seen[base] = true
		f := family{name: base}
		types := map[string]bool{}
		for comp, mfs := range fams {
			if mf, ok := mfs[base]; ok {
				f.components = append(f.components, comp)
				types[typeNames[mf.GetType()]] = true
			}
		}
		sort.Strings(f.components)
		for typ := range types {
			f.typ = typ
		}
		if len(types) > 1 {
			f.typ = "conflicting-types"
		}
		found = append(found, f)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].name < found[j].name })
	return found, missing
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(format, args...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
