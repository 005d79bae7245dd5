package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/chaos/runner"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// TestScenarioTunnelProjectOnly: a scenario that needs what only this project's tunnel has, run
// against another tunnel, exits 2 before it starts anything, in one line naming the tunnel and each
// such fault and setting; an unknown tunnel exits 2 listing the registered ones.
func TestScenarioTunnelProjectOnly(t *testing.T) {
	shipped := func(name string) string { return filepath.Join("..", "..", "scenarios", name+".yaml") }
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--tunnel", "jhump-grpctunnel", shipped("kas-kill")},
			[]string{"not to jhump-grpctunnel", "line 20: fault kill-kas acts on kas replicas"}},
		{[]string{"--tunnel=openconfig-grpctunnel", shipped("redis-outage")},
			[]string{"not to openconfig-grpctunnel", "fault stop-redis acts on the Redis of kas's tracker", "topology tracker: redis"}},
		{[]string{"--tunnel", "remotedialer", writeScenario(t, `
name: caller-link
topology: {kas: 1, agents: 2}
load: {rate: 10, duration: 5s}
faults:
  - {at: 1s, link: caller->kas, type: latency, params: {latency: 10ms}}
expect: {zero_failed: true}
`)}, []string{"not to remotedialer", "line 6: fault latency on caller->kas"}},
		{[]string{"--tunnel", "tunnel-single-use", shipped("max-connection-age")},
			[]string{"not to tunnel-single-use", "topology max_connection_age: 3s"}},
		{[]string{"--tunnel", "no-such-tunnel", shipped("agent-latency")},
			[]string{`--tunnel: unknown tunnel "no-such-tunnel" (registered: tunnel, `}},
	} {
		code, stdout, stderr := runArgs(t, append([]string{"scenario", "run", "--out", t.TempDir()}, tc.args...)...)
		msg := strings.TrimSpace(stderr)
		if code != 2 || stdout != "" || strings.Contains(msg, "\n") {
			t.Errorf("%q: exit %d, want 2 and one line:\n%s\n%s", tc.args, code, stdout, stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q: %q does not say %q", tc.args, msg, w)
			}
		}
	}
}

// TestScenarioTunnelRun: scenario run --tunnel runs an agent-link fault against a peer and exits 0
// when it held; its results name the tunnel and what the run left out.
func TestScenarioTunnelRun(t *testing.T) {
	testtier.Full(t, "runs a chaos scenario against a peer with seconds of load")
	file := writeScenario(t, `
name: peer-latency
topology: {kas: 1, agents: 2, tunnels_per_agent: 2, find_timeout: 1s}
load: {shape: unary, payload: 1KiB, rate: 20, duration: 3s, call_timeout: 2s}
faults:
  - {at: 1s, for: 1s, link: agent->kas, type: latency, params: {latency: 20ms}, select: {agents: 2}}
expect:
  zero_failed: true
  routing_timeouts: "== 0"
`)
	out := t.TempDir()
	code, stdout, stderr := runArgs(t, "scenario", "run", "--tunnel", "jhump-grpctunnel", "--out", out, file)
	if code != 0 || !strings.HasPrefix(stdout, "peer-latency on jhump-grpctunnel — PASSED") {
		t.Fatalf("exit %d, want 0 and a pass on jhump-grpctunnel:\n%s\n%s", code, stdout, stderr)
	}
	sum, err := runner.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Tunnel != "jhump-grpctunnel" || len(sum.NotApplied) != 3 || sum.Calls.Sent < 50 {
		t.Errorf("tunnel %q, not applied %q, %d calls", sum.Tunnel, sum.NotApplied, sum.Calls.Sent)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "Run against tunnel `jhump-grpctunnel`") {
		t.Errorf("report.md does not say which tunnel ran (%v)", err)
	}
}
