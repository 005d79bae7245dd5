package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/tunnels"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// chaosTunnels are the tunnels the short agent-link scenarios run against through their adapters:
// this project's tunnel (which must hold there as on its own topology) and the peers. remotedialer
// has data races of its own (bench/tunnels/remotedialer.go), so it runs without -race only.
func chaosTunnels() []string {
	out := []string{tunnels.Reuse, tunnels.OpenconfigGrpctunnel, tunnels.JhumpGrpctunnel}
	if !raceDetector {
		out = append(out, tunnels.Remotedialer)
	}
	return out
}

// runOn runs sc against tunnel through its adapter; the run itself must work (faults applied and
// removed, the tunnel closed), whatever its objectives say.
func runOn(t *testing.T, sc *scenario.Scenario, tunnel string) *Summary {
	t.Helper()
	testtier.Full(t, "runs chaos scenario "+sc.Name+" against "+tunnel+" with seconds of load")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Run(ctx, sc, Options{Tunnel: tunnel, Progress: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range sum.Objectives {
		t.Logf("%v %s: want %s, got %s", o.OK, o.Name, o.Want, o.Got)
	}
	t.Logf("calls: sent %d, ok %d, failed by code %v; not applied: %q", sum.Calls.Sent, sum.Calls.OK, sum.Calls.FailedByCode, sum.NotApplied)
	if sum.Tunnel != tunnel || sum.Failure != "" {
		t.Fatalf("tunnel %q, failure %q", sum.Tunnel, sum.Failure)
	}
	for _, o := range sum.Objectives {
		if strings.HasPrefix(o.Name, "invariant: one outcome") && !o.OK || strings.HasPrefix(o.Name, "invariant: calls end by") && !o.OK {
			t.Errorf("%s: got %s", o.Name, o.Got)
		}
	}
	return sum
}

func objective(sum *Summary, name string) (ObjectiveResult, bool) {
	i := slices.IndexFunc(sum.Objectives, func(o ObjectiveResult) bool { return o.Name == name })
	if i < 0 {
		return ObjectiveResult{}, false
	}
	return sum.Objectives[i], true
}

// TestShortAgentLatencyTunnels: 200 ms more each way on two agents' links slows their calls, and only
// theirs, on every tunnel; kas's routing timeouts are left out, by name, rather than counted as zero.
// The fault is far larger than the bound on unaffected calls (400 ms per call against 200 ms) so that
// a pause of the race detector on a loaded 2-core machine (a 51.6 ms p99 once, in CI, with a 50 ms
// bound) cannot pass for the fault leaking to other agents.
func TestShortAgentLatencyTunnels(t *testing.T) {
	for _, tunnel := range chaosTunnels() {
		t.Run(tunnel, func(t *testing.T) {
			sum := runOn(t, parse(t, "agent-latency-short", `
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
  routing_timeouts: "== 0"
  unaffected:
    latency_p99: "<= 200ms"
`), tunnel)
			if !sum.Passed {
				t.Errorf("%s", Verdict(sum))
			}
			if _, ok := objective(sum, "routing_timeouts == 0"); ok || !slices.ContainsFunc(sum.NotApplied, func(s string) bool { return strings.Contains(s, "routing_timeouts") }) {
				t.Errorf("routing_timeouts measured, or not said to be left out: %q", sum.NotApplied)
			}
			slow := 0
			for _, s := range sum.Timeline[2:4] {
				if s.LatencyUs.P99 >= 400_000 { // 200 ms each way
					slow++
				}
			}
			if slow == 0 {
				t.Errorf("no second during the fault shows its latency: %+v", sum.Timeline[2:4])
			}
		})
	}
}

// TestShortAgentBlackholeTunnels: one agent's link drops every byte for 3 s. Its calls fail, the
// other agents' calls do not notice, and once the black hole closes its connections the agent comes
// back. remotedialer is the slowest back (6 to 10 s here): its agents wait 5 s before they connect
// again, as its ClientConnect does, and the caller's gRPC connection waits out its reconnect backoff.
// "Do not notice" is a p99 bound of 250 ms, an eighth of the 2 s a call caught in the black hole
// waits: a tighter bound measures the race detector's pauses on a loaded machine, not the tunnel.
func TestShortAgentBlackholeTunnels(t *testing.T) {
	for _, tunnel := range chaosTunnels() {
		t.Run(tunnel, func(t *testing.T) {
			sum := runOn(t, parse(t, "agent-blackhole-short", `
name: agent-blackhole-short
topology: {kas: 1, agents: 5, tunnels_per_agent: 2, find_timeout: 5s}
load: {shape: unary, payload: 1KiB, rate: 50, duration: 20s, call_timeout: 2s}
faults:
  - at: 3s
    for: 3s
    link: agent->kas
    type: blackhole
    select: {fraction: 0.2}
expect:
  recovery: "<= 15s"
  unaffected:
    zero_failed: true
    latency_p99: "<= 250ms"
`), tunnel)
			if !sum.Passed {
				t.Errorf("%s", Verdict(sum))
			}
			var failed int64
			for _, n := range sum.Calls.FailedByCode {
				failed += n
			}
			if failed == 0 {
				t.Error("no call failed: the black hole did not reach agent 1's link")
			}
		})
	}
}

// TestTunnelProjectOnly: a kas-only fault against another tunnel is refused before anything starts.
func TestTunnelProjectOnly(t *testing.T) {
	sc := parse(t, "kill", `
name: kill
topology: {kas: 2, agents: 2}
load: {rate: 10, duration: 5s}
faults:
  - {at: 1s, process: kill-kas, select: {kas: 1}}
expect: {max_failed: inflight_at_kill}
`)
	_, err := Run(context.Background(), sc, Options{Tunnel: tunnels.OpenconfigGrpctunnel})
	var te *scenario.TunnelError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "fault kill-kas acts on kas replicas") {
		t.Fatalf("error %v, want a *scenario.TunnelError naming kill-kas", err)
	}
}
