package main

import (
	"path/filepath"
	"strings"
	"testing"
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
			[]string{"not to jhump-grpctunnel", "line 20: fault kill-kas acts on kas replicas", "topology kas: 3"}},
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
