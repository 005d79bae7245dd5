package runner

import (
	"context"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/chaos/scenario"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

func parse(t *testing.T, name, yaml string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse(name+".yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// runScenario runs sc against an in-process topology: seconds of load, so only in the full tier.
func runScenario(t *testing.T, sc *scenario.Scenario) *Summary {
	t.Helper()
	testtier.Full(t, "runs chaos scenario "+sc.Name+" with seconds of load")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Run(ctx, sc, Options{Progress: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range sum.Objectives {
		t.Logf("%v %s: want %s, got %s", o.OK, o.Name, o.Want, o.Got)
	}
	if sum.Failure != "" {
		t.Logf("failure: %s", sum.Failure)
	}
	t.Logf("calls: sent %d, ok %d, failed by code %v", sum.Calls.Sent, sum.Calls.OK, sum.Calls.FailedByCode)
	return sum
}

func TestShortBaseline(t *testing.T) {
	sum := runScenario(t, parse(t, "baseline-short", `
name: baseline-short
topology: {kas: 2, agents: 4, tunnels_per_agent: 2, find_timeout: 5s}
load: {shape: unary, payload: 1KiB, rate: 100, duration: 4s, call_timeout: 5s}
expect:
  success_ratio: ">= 1"
  routing_timeouts: "== 0"
`))
	if !sum.Passed || sum.Calls.Sent < 350 || len(sum.Timeline) < 4 {
		t.Fatalf("passed %v, %d calls, %d seconds", sum.Passed, sum.Calls.Sent, len(sum.Timeline))
	}
}

func TestShortKasKill(t *testing.T) {
	sum := runScenario(t, parse(t, "kas-kill-short", `
name: kas-kill-short
topology: {kas: 3, agents: 9, tunnels_per_agent: 2, find_timeout: 10s}
load: {shape: unary, payload: 1KiB, rate: 150, duration: 12s, call_timeout: 15s}
faults:
  - at: 3s
    process: kill-kas
    select: {kas: 1}
expect:
  max_failed: inflight_at_kill
  recovery: "<= 15s"
`))
	if !sum.Passed {
		t.Fatalf("kas-kill failed: %s", sum.Failure)
	}
	if sum.RecoveryS == nil || len(sum.Faults) != 1 {
		t.Fatalf("recovery %v, faults %v", sum.RecoveryS, sum.Faults)
	}
}

func TestShortMaxConnectionAge(t *testing.T) {
	sum := runScenario(t, parse(t, "max-connection-age-short", `
name: max-connection-age-short
topology: {kas: 1, agents: 4, tunnels_per_agent: 3, max_connection_age: 2s, find_timeout: 5s}
load: {shape: unary, payload: 1KiB, rate: 200, duration: 10s, call_timeout: 5s}
expect:
  zero_failed: true
  routing_timeouts: "== 0"
`))
	if !sum.Passed {
		t.Fatalf("max-connection-age failed: %s", sum.Failure)
	}
	var conns int64
	for _, s := range sum.Timeline {
		conns += s.NewConnections
	}
	if conns < 8 {
		t.Fatalf("%d new agent connections in 10 s with a 2 s max age: no rotation", conns)
	}
}

// TestShortAgentLatency: 200 ms more each way on two agents' links slows their calls and only theirs;
// the fault is twice the bound on unaffected calls so that a scheduling pause cannot look like a leak.
func TestShortAgentLatency(t *testing.T) {
	sum := runScenario(t, parse(t, "agent-latency-short", `
name: agent-latency-short
topology: {kas: 1, agents: 4, tunnels_per_agent: 2, find_timeout: 5s}
load: {shape: unary, payload: 1KiB, rate: 50, duration: 6s, call_timeout: 5s}
faults:
  - at: 2s
    for: 2s
    link: agent->kas
    type: latency
    params: {latency: 200ms}
    select: {agents: [1, 2]}
expect:
  success_ratio: ">= 1"
  unaffected:
    latency_p99: "<= 200ms"
`))
	if !sum.Passed {
		t.Fatalf("agent-latency failed: %s", sum.Failure)
	}
	slow := 0
	for _, s := range sum.Timeline[2:4] {
		if s.LatencyUs.P99 >= 400_000 { // 200 ms each way
			slow++
		}
	}
	if slow == 0 {
		t.Fatalf("no second during the fault shows its latency: %+v", sum.Timeline[2:4])
	}
}
