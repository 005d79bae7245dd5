package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestCheckTunnel runs the shipped scenarios past another tunnel: those that need kas replicas, kas's
// tracker, its connection rotation or a process fault are refused in one line that names the tunnel
// and each such fault and setting; the others run, leaving out kas's settings and metrics by name.
func TestCheckTunnel(t *testing.T) {
	const peer = "openconfig-grpctunnel"
	shipped := loadShipped(t)
	// Several kas run as the adapter's one server (not applied); the rest is this project's only.
	refused := map[string][]string{
		"agent-rolling-restart": {"fault restart-agents stops agentk agents"},
		"kas-kill":              {"line 20: fault kill-kas acts on kas replicas"},
		"max-connection-age":    {"topology max_connection_age: 3s"},
		"reconnect-storm":       {"fault stop-kas acts on kas replicas"},
		"redis-outage":          {"topology tracker: redis", "fault stop-redis acts on the Redis of kas's tracker"},
	}
	for _, name := range shippedNames {
		sc := shipped[name]
		if sc == nil {
			continue
		}
		notApplied, err := sc.CheckTunnel(peer)
		want, isRefused := refused[name]
		if !isRefused {
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if len(notApplied) < 2 || !strings.Contains(strings.Join(notApplied, "; "), "tunnels_per_agent") {
				t.Errorf("%s: not applied %q: want kas's and agentk's settings named", name, notApplied)
			}
			if kas := sc.Topology.Kas; kas > 1 && !strings.Contains(notApplied[0], fmt.Sprintf("kas: %d (%s has one server", kas, peer)) {
				t.Errorf("%s: not applied %q: want its %d kas named", name, notApplied, kas)
			}
			continue
		}
		var te *TunnelError
		if !errors.As(err, &te) {
			t.Errorf("%s: error %v, want a *TunnelError", name, err)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, sc.File+": these apply to this project's tunnel only, not to "+peer+": ") {
			t.Errorf("%s: %q: want one line naming the file and the tunnel", name, msg)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", name, msg, w)
			}
		}
	}
}

func TestCheckTunnelLinks(t *testing.T) {
	for _, tc := range []struct {
		link, want string
	}{
		{"agent->kas", ""},
		{"caller->kas", "latency on caller->kas: an adapter's callers sit in its server's process"},
	} {
		sc, err := Parse("link.yaml", []byte(`
name: link
topology: {kas: 1, agents: 2}
load: {rate: 10, duration: 10s}
faults:
  - {at: 1s, for: 1s, link: `+tc.link+`, type: latency, params: {latency: 10ms}}
expect:
  latency_p99: "<= 1s"
  routing_timeouts: "== 0"
`))
		if err != nil {
			t.Fatal(err)
		}
		notApplied, err := sc.CheckTunnel("jhump-grpctunnel")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.link, err)
		case tc.want == "" && !slices.ContainsFunc(notApplied, func(s string) bool { return strings.HasPrefix(s, "objective routing_timeouts == 0") }):
			t.Errorf("%s: not applied %q: want routing_timeouts named", tc.link, notApplied)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "line 6: fault "+tc.want)):
			t.Errorf("%s: error %v, want it to say %q", tc.link, err, tc.want)
		}
	}
}
