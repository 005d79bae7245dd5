package kas_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

func TestMetricsByValue(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kas: shortFind})
	c := testgrpc.NewTestServiceClient(e.Public)
	for range 5 {
		if _, err := c.EmptyCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{}); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = c.EmptyCall(testenv.AgentCtx(testCtx(t), 42), &testpb.Empty{}) // times out

	ae := e.Agents[1]
	var idle float64
	testenv.Eventually(t, 5*time.Second, func() bool {
		st := ae.Agent.Stats()
		idle = float64(st.Idle)
		return st.Connecting == 0 && st.Busy == 0 && testenv.Value(testenv.Scrape(t, e.Metrics)["tunnel_tunnels"], "state", "idle") == idle
	}, "agent pool and kas did not settle: %+v", ae.Agent.Stats())

	m := testenv.Scrape(t, e.Metrics)
	check := func(name string, want float64, labels ...string) {
		t.Helper()
		if got := testenv.Value(m[name], labels...); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	check("tunnel_routing_duration_seconds", 5, "status", "success")
	check("tunnel_routing_duration_seconds", 1, "status", "aborted")
	check("tunnel_routing_duration_exponential_seconds", 5, "status", "success")
	check("tunnel_routing_duration_exponential_seconds", 1, "status", "aborted")
	check("tunnel_routing_timeout_total", 1)
	check("tunnel_tunnels", idle, "state", "idle")
	check("tunnel_tunnels", 0, "state", "busy")
	check("tunnel_waiting_calls", 0)
	check("tunnel_connected_agents", 1)

	h := m["tunnel_routing_duration_seconds"]
	if h.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("tunnel_routing_duration_seconds is a %v", h.GetType())
	}
	var bounds []float64
	for _, b := range h.GetMetric()[0].GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	// The seed's buckets are a contract: the exponential histogram is beside them, not instead.
	if want := []float64{0.001, 0.004, 0.016, 0.064, 0.256, 1.024, 4.096, 16.384}; !slices.Equal(bounds, want) || !slices.Equal(routing.RoutingDurationBuckets, want) {
		t.Errorf("buckets %v, want %v", bounds, want)
	}
	if h.GetMetric()[0].GetHistogram().Schema != nil {
		t.Error("tunnel_routing_duration_seconds became a native histogram")
	}
	for _, em := range m["tunnel_routing_duration_exponential_seconds"].GetMetric() {
		if eh := em.GetHistogram(); eh.Schema == nil || eh.GetSchema() < 4 || len(eh.GetBucket()) != 0 {
			t.Errorf("tunnel_routing_duration_exponential_seconds: schema %v (want native, >= 4), %d classic buckets", eh.Schema, len(eh.GetBucket()))
		}
	}

	am := testenv.Scrape(t, ae.Metrics)
	if got := testenv.Value(am["tunnel_agent_connections"], "state", "idle"); got != idle {
		t.Errorf("agent idle connections %v, want %v", got, idle)
	}
	if got := testenv.Value(am["tunnel_agent_connections"], "state", "busy"); got != 0 {
		t.Errorf("agent busy connections %v, want 0", got)
	}
}

// TestMetricsEndpoint reads /metrics over HTTP as Prometheus would, after one routed call.
func TestMetricsEndpoint(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) { c.MetricsListen = "127.0.0.1:0" }})
	if _, err := testgrpc.NewTestServiceClient(e.Public).EmptyCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	base := "http://" + e.Kas.Addrs().Metrics.String()
	body := get(t, base+"/metrics")
	for _, le := range []string{"0.001", "0.004", "0.016", "0.064", "0.256", "1.024", "4.096", "16.384", "+Inf"} {
		want := fmt.Sprintf(`tunnel_routing_duration_seconds_bucket{status="success",le="%s"}`, le)
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, want := range []string{"tunnel_routing_timeout_total", "tunnel_routing_duration_seconds_sum", "tunnel_routing_duration_seconds_count"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if got := get(t, base+"/healthz"); got != "ok\n" {
		t.Errorf("/healthz: %q", got)
	}
	if got := get(t, base+"/readyz"); got != "ready\n" {
		t.Errorf("/readyz: %q", got)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
