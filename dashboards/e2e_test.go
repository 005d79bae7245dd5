package dashboards_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tunnelbench/tunnelbench/internal/procs"
)

// e2eScenario is the scenario name the simulated chaos run records under.
const e2eScenario = "e2e"

// TestDashboardsEndToEnd scrapes live components with a real Prometheus, drives load and a simulated
// chaos run, and checks that every dashboard query returns data.
func TestDashboardsEndToEnd(t *testing.T) {
	requireBinary(t, prometheusBin)
	queries := allQueries(t)
	e := startEnv(t)
	ctx := t.Context()

	kasSrv := httptest.NewServer(e.topo.Metrics[0].Handler())
	t.Cleanup(kasSrv.Close)
	harnessSrv := httptest.NewServer(e.harness.Handler())
	t.Cleanup(harnessSrv.Close)
	targets := map[string]string{
		"kas":         kasSrv.Listener.Addr().String(),
		"agentk":      e.agentk.MetricsAddr().String(),
		"tunnelbench": harnessSrv.Listener.Addr().String(),
	}
	prom := startPrometheus(t, targets)

	// Before any scrape: a call that times out, so that timeouts and non-OK codes exist.
	e.timeoutCall(t, ctx, e2eScenario)
	loadStart := time.Now()
	stopLoad := driveLoad(t, e)
	defer stopLoad()

	// The simulated chaos run: a fault that ends and is recovered from, then one still active when the
	// dashboards are queried.
	e.hm.Fault(e2eScenario, "agent-kas", "latency", true)
	sleep(t, 2*time.Second)
	e.hm.Fault(e2eScenario, "agent-kas", "latency", false)
	e.hm.Recovery(e2eScenario, 700*time.Millisecond)
	e.hm.Fault(e2eScenario, "kas-kas", "blackhole", true)

	// Enough scrapes of every target that each rate window holds several samples.
	prom.waitScrapes(t, 6, 20*time.Second)
	if since := time.Since(loadStart); since < 6*time.Second {
		sleep(t, 6*time.Second-since)
	}

	for _, q := range queries {
		expr, err := substitute(q.expr)
		if err != nil {
			t.Errorf("%v: %v", q, err)
			continue
		}
		if q.labelValues != "" {
			values := prom.labelValues(t, q.labelValues, expr)
			if len(values) == 0 {
				t.Errorf("%v: label_values(%s, %s) is empty", q, expr, q.labelValues)
			}
			t.Logf("%v: %v", q, values)
			continue
		}
		res := prom.query(t, expr)
		t.Logf("%v: %d values, %d numbers", q, res.n, res.numbers)
		if res.n == 0 {
			t.Errorf("%v: no data (%s)", q, res.raw)
		} else if res.numbers == 0 {
			t.Errorf("%v: only NaN (%s)", q, res.raw)
		}
	}
}

// driveLoad calls agent 1 through kas continuously, records every call in the harness metrics, and
// every 400 ms makes a call that times out. The returned function stops it and waits.
func driveLoad(t *testing.T, e *env) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := e.callAndRecord(ctx, e2eScenario, 1); err != nil && ctx.Err() == nil {
				t.Errorf("routed call: %v", err)
				return
			}
			pause(ctx, 5*time.Millisecond)
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			_ = e.callAndRecord(ctx, e2eScenario, unknownAgent)
			pause(ctx, 100*time.Millisecond)
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

func pause(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

func sleep(t *testing.T, d time.Duration) {
	t.Helper()
	pause(t.Context(), d)
	if t.Context().Err() != nil {
		t.Fatal("test ended while waiting")
	}
}

// prometheus is a Prometheus server run by a test.
type prometheus struct {
	base   string
	client *http.Client
}

// startPrometheus runs /usr/bin/prometheus on a free loopback port with prometheus.yml from this folder,
// its targets replaced by targets (job -> address) and a one-second scrape interval. Cleanup stops it.
func startPrometheus(t *testing.T, targets map[string]string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	var cfg map[string]any
	readYAML(t, "prometheus.yml", &cfg)
	global, _ := cfg["global"].(map[string]any)
	if global == nil {
		t.Fatal("prometheus.yml has no global section")
	}
	global["scrape_interval"] = "1s"
	global["evaluation_interval"] = "1s"
	seen := map[string]bool{}
	scrapeConfigs, _ := cfg["scrape_configs"].([]any)
	for _, sc := range scrapeConfigs {
		scm := sc.(map[string]any)
		job, _ := scm["job_name"].(string)
		addr, ok := targets[job]
		if !ok {
			t.Fatalf("prometheus.yml scrapes job %q, which the test does not run", job)
		}
		seen[job] = true
		scm["static_configs"] = []any{map[string]any{"targets": []string{addr}}}
	}
	for job := range targets {
		if !seen[job] {
			t.Fatalf("prometheus.yml has no job %q", job)
		}
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := procs.FreeAddr(t)
	proc := procs.Start(t, prometheusBin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus output:\n%s", proc.Output())
		}
	})
	p := &prometheus{base: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second}}
	err = proc.WaitReady(context.Background(), 20*time.Second, func() bool {
		resp, err := p.client.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		t.Fatalf("prometheus: %v\n%s", err, proc.Output())
	}
	return p
}

// apiResponse is the envelope of Prometheus's HTTP API.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

func (p *prometheus) get(t *testing.T, path string, params url.Values) json.RawMessage {
	t.Helper()
	resp, err := p.client.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r apiResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("GET %s %v: %s: %s", path, params, resp.Status, b)
	}
	if r.Status != "success" {
		t.Fatalf("GET %s %v: %s: %s", path, params, r.ErrorType, r.Error)
	}
	return r.Data
}

// result summarizes a query result: how many series or samples, how many of them numbers.
type result struct {
	n, numbers int
	raw        string
}

// query evaluates expr at the current time (/api/v1/query).
func (p *prometheus) query(t *testing.T, expr string) result {
	t.Helper()
	data := p.get(t, "/api/v1/query", url.Values{"query": {expr}})
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	res := result{raw: string(data)}
	count := func(v [2]any) {
		res.n++
		s, _ := v[1].(string)
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) {
			res.numbers++
		}
	}
	switch d.ResultType {
	case "vector":
		var series []struct {
			Value [2]any `json:"value"`
		}
		if err := json.Unmarshal(d.Result, &series); err != nil {
			t.Fatal(err)
		}
		for _, s := range series {
			count(s.Value)
		}
	case "matrix":
		var series []struct {
			Values [][2]any `json:"values"`
		}
		if err := json.Unmarshal(d.Result, &series); err != nil {
			t.Fatal(err)
		}
		for _, s := range series {
			for _, v := range s.Values {
				count(v)
			}
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(d.Result, &v); err != nil {
			t.Fatal(err)
		}
		count(v)
	default:
		t.Fatalf("%s: result type %q", expr, d.ResultType)
	}
	return res
}

// labelValues is what Grafana's label_values(metric, label) asks Prometheus.
func (p *prometheus) labelValues(t *testing.T, label, match string) []string {
	t.Helper()
	data := p.get(t, "/api/v1/label/"+url.PathEscape(label)+"/values", url.Values{"match[]": {match}})
	var values []string
	if err := json.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	return values
}

// waitScrapes waits until every target is up and has been scraped at least n times.
func (p *prometheus) waitScrapes(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	expr := fmt.Sprintf(`count_over_time(up[1m]) >= %d and up == 1`, n)
	for {
		var targets struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		}
		if err := json.Unmarshal(p.get(t, "/api/v1/targets", nil), &targets); err != nil {
			t.Fatal(err)
		}
		if res := p.query(t, expr); res.n == len(targets.ActiveTargets) && res.n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("targets not scraped %d times within %s: %+v", n, timeout, targets.ActiveTargets)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
