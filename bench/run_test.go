package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// tinyRun runs a small matrix end to end on a real in-process topology.
func tinyRun(t *testing.T, opts Options) *Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestTinyMatrixEndToEnd(t *testing.T) {
	testtier.Full(t, "runs the bench matrix for seconds")
	sum := tinyRun(t, Options{
		Matrix: Matrix{
			Paths:       []Path{PathDirect, PathTunnel, PathTunnelPublic, PathTunnel2Hop},
			Shapes:      []ShapeSpec{{load.ShapeUnary, 64}, {load.ShapeServerStream, 1024}, {load.ShapeBidi, 64}},
			Concurrency: []int{2},
		},
		Warmup:   50 * time.Millisecond,
		Duration: 300 * time.Millisecond,
		Rounds:   2,
		HTTPRate: 100,
	})
	dir := t.TempDir()
	if err := sum.WriteJSON(dir); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, filepath.Join(dir, "summary.json"))

	byName := map[string]CaseResult{}
	for _, c := range sum.Cases {
		byName[c.Name] = c
	}
	if len(sum.Cases) != 3*4+3 {
		t.Fatalf("%d cases, want 15 (12 and the HTTP group: direct, tunnel, proxy)", len(sum.Cases))
	}
	if _, ok := byName[httpCaseName(100, PathHTTPProxy)]; !ok {
		t.Errorf("no %s case", httpCaseName(100, PathHTTPProxy))
	}
	for _, c := range sum.Cases {
		if c.Calls == 0 {
			t.Errorf("%s made no calls", c.Name)
		}
		if c.Errors != 0 {
			t.Errorf("%s: %d errors %v", c.Name, c.Errors, c.ErrorsByCode)
		}
		if c.Path == string(PathDirect) || c.Path == string(PathHTTPDirect) {
			if c.RatioToDirect != nil || c.Routing != nil {
				t.Errorf("direct case %s has a ratio or routing", c.Name)
			}
			continue
		}
		pair, ok := byName[c.Pair]
		if !ok || (pair.Path != string(PathDirect) && pair.Path != string(PathHTTPDirect)) || c.RatioToDirect == nil {
			t.Errorf("tunneled case %s has no direct pair (%q) or no ratio", c.Name, c.Pair)
			continue
		}
		if c.RatioToDirect.P50 <= 0 || c.RatioToDirect.CallsPerSec <= 0 {
			t.Errorf("%s: ratio %+v", c.Name, *c.RatioToDirect)
		}
		if c.Path != string(PathHTTPTunnel) && c.Path != string(PathHTTPProxy) && (c.Routing == nil || len(c.Routing.BucketCounts) != len(c.Routing.BucketBoundsS)+1) {
			t.Errorf("%s: routing %+v", c.Name, c.Routing)
		}
	}
}

func TestErrorsAreCounted(t *testing.T) {
	// Calls for an agent that never connects fail with DeadlineExceeded: every one must be counted.
	sum := tinyRun(t, Options{
		Matrix:   Matrix{Paths: []Path{PathDirect, PathTunnel}, Shapes: []ShapeSpec{{load.ShapeUnary, 64}}, Concurrency: []int{4}},
		Duration: 400 * time.Millisecond,
		Rounds:   1,
		AgentID:  99,
		Topology: TopologyConfig{FindTimeout: 50 * time.Millisecond},
	})
	tunnel := sum.Cases[1]
	if tunnel.Path != string(PathTunnel) || tunnel.Calls == 0 || tunnel.Errors != tunnel.Calls {
		t.Fatalf("tunnel case: %d calls, %d errors", tunnel.Calls, tunnel.Errors)
	}
	if tunnel.ErrorsByCode["DeadlineExceeded"] != tunnel.Errors {
		t.Fatalf("errors by code %v, want every one DeadlineExceeded", tunnel.ErrorsByCode)
	}
	if tunnel.Routing == nil || tunnel.Routing.Timeouts != tunnel.Errors {
		t.Fatalf("routing timeouts %+v, want %d", tunnel.Routing, tunnel.Errors)
	}
	// Failed calls are no throughput, and they fail the case (the run tolerates no error by default).
	if !tunnel.Failed || tunnel.CallsPerSec != 0 || tunnel.BytesPerSec != 0 || tunnel.RatioToDirect.CallsPerSec != 0 {
		t.Errorf("tunnel case: failed %v, calls/s %v, bytes/s %v, ratio %+v", tunnel.Failed, tunnel.CallsPerSec, tunnel.BytesPerSec, tunnel.RatioToDirect)
	}
	if direct := sum.Cases[0]; direct.Failed || direct.Errors != 0 || direct.CallsPerSec <= 0 {
		t.Errorf("direct case: failed %v, %d errors, calls/s %v", direct.Failed, direct.Errors, direct.CallsPerSec)
	}
	if f := sum.Failures(); len(f) != 1 || !strings.Contains(f[0], "unary-64B/c4/tunnel: ") || !strings.Contains(f[0], "(DeadlineExceeded ") {
		t.Errorf("failures %q", f)
	}
}

// TestMaxErrorRateTolerates: with every call failing, only a tolerated rate of 1 keeps the case from
// failing; the settings record the rate.
func TestMaxErrorRateTolerates(t *testing.T) {
	sum := tinyRun(t, Options{
		Matrix:       Matrix{Paths: []Path{PathDirect, PathTunnel}, Shapes: []ShapeSpec{{load.ShapeUnary, 64}}, Concurrency: []int{2}},
		Duration:     200 * time.Millisecond,
		AgentID:      99,
		MaxErrorRate: 1,
		Topology:     TopologyConfig{FindTimeout: 20 * time.Millisecond, Transport: TransportBufconn},
	})
	if c := sum.Cases[1]; c.Failed || c.Errors == 0 || len(sum.Failures()) != 0 {
		t.Errorf("case %s: failed %v with %d errors; failures %q", c.Name, c.Failed, c.Errors, sum.Failures())
	}
	if s := sum.Settings; s == nil || s.MaxErrorRate != 1 || s.Topology != TopologyInProcess || s.Transport != "bufconn" || s.Rounds != 1 ||
		s.DurationS != 0.2 || s.Kas != 1 || s.Agents != 1 || s.TunnelsPerAgent != DefaultTunnelsPerAgent || s.Target != nil {
		t.Errorf("settings %+v", s)
	}
}

// checkSchema checks summary.json against the documented schema: every field present with its type.
func checkSchema(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != SummarySchema {
		t.Fatalf("schema %v", doc["schema"])
	}
	need := func(obj map[string]any, where string, fields map[string]string) {
		for f, typ := range fields {
			v, ok := obj[f]
			if !ok {
				t.Errorf("%s lacks %q", where, f)
				continue
			}
			switch typ {
			case "string":
				_, ok = v.(string)
			case "number":
				_, ok = v.(float64)
			case "object":
				_, ok = v.(map[string]any)
			case "object|null":
				_, ok = v.(map[string]any)
				ok = ok || v == nil
			case "array":
				_, ok = v.([]any)
			}
			if !ok {
				t.Errorf("%s.%s is %T, want %s", where, f, v, typ)
			}
		}
	}
	env, _ := doc["env"].(map[string]any)
	need(env, "env", map[string]string{"go": "string", "grpc": "string", "cpus": "number", "gomaxprocs": "number", "os": "string", "arch": "string", "git_commit": "string", "started_at": "string"})
	cases, _ := doc["cases"].([]any)
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range cases {
		cm := c.(map[string]any)
		need(cm, "case", map[string]string{"name": "string", "path": "string", "shape": "string", "payload_bytes": "number", "concurrency": "number",
			"mode": "string", "calls": "number", "errors": "number", "calls_per_s": "number", "bytes_per_s": "number", "latency_us": "object",
			"allocs_per_call": "number", "routing": "object|null", "ratio_to_direct": "object|null"})
		lat, _ := cm["latency_us"].(map[string]any)
		need(lat, "latency_us", map[string]string{"p50": "number", "p90": "number", "p99": "number", "p999": "number", "max": "number"})
		if r, ok := cm["routing"].(map[string]any); ok {
			need(r, "routing", map[string]string{"p50_us": "number", "p99_us": "number", "timeouts": "number"})
		}
		if r, ok := cm["ratio_to_direct"].(map[string]any); ok {
			need(r, "ratio_to_direct", map[string]string{"p50": "number", "p99": "number", "calls_per_s": "number", "bytes_per_s": "number"})
		}
	}
	if _, ok := doc["scale"]; !ok {
		t.Error("summary lacks scale")
	}
	settings, _ := doc["settings"].(map[string]any)
	need(settings, "settings", map[string]string{"warmup_s": "number", "duration_s": "number", "rounds": "number", "topology": "string",
		"http_rate": "number", "max_error_rate": "number"})
	if runtime.GOOS == "linux" {
		need(env, "env", map[string]string{"kernel": "string", "load_avg": "array", "load_avg_end": "array"})
	}
	if rounds, _ := settings["rounds"].(float64); rounds > 1 {
		for _, c := range cases {
			cm := c.(map[string]any)
			need(cm, "case", map[string]string{"rounds": "array", "spread": "object"})
			if _, paired := cm["direct_pair"]; paired {
				need(cm, "case", map[string]string{"ratio_spread": "object"})
			}
		}
	}
}
