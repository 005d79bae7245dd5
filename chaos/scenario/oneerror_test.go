package scenario

import (
	"strings"
	"testing"
)

// TestParseOneErrorPerMistake: a fault with one mistake gets exactly one error, about that mistake.
// A value that could not be read is not reported again as missing, and checks that depend on it
// (the selection's size, a rolling restart's span) are not made with a stand-in value.
func TestParseOneErrorPerMistake(t *testing.T) {
	const (
		head = "name: t\ntopology: {kas: 3, agents: 10}\nload: {rate: 10, duration: 30s}\nexpect: {zero_failed: true}\nfaults:\n"
	)
	for _, tc := range []struct{ name, fault, want string }{
		{"params not a mapping", "{at: 1s, link: agent->kas, type: latency, params: 100ms}",
			"x.yaml:6:55: faults[0].params: want a mapping of parameters, e.g. {latency: 100ms}"},
		{"param is a list", "{at: 1s, link: agent->kas, type: latency, params: {latency: [1]}}",
			"x.yaml:6:65: faults[0].params.latency: want a single value, not a list or mapping"},
		{"param is null", "{at: 1s, link: agent->kas, type: slow-close, params: {delay: }}",
			"x.yaml:6:59: faults[0].params.delay: missing value"},
		{"bad kas index", "{at: 1s, process: kill-kas, select: {kas: x}}",
			`x.yaml:6:47: faults[0].select.kas: bad kas index "x" (want a whole number from 0)`},
		{"no such kas", "{at: 1s, process: kill-kas, select: {kas: 7}}",
			"x.yaml:6:47: faults[0].select.kas: no kas 7 (the topology has kas 0..2)"},
		{"bad count", "{at: 1s, process: stop-kas, select: {count: 0}}",
			"x.yaml:6:49: faults[0].select.count: 0 is out of range (want 1 to 10000)"},
		{"bad fraction", "{at: 1s, process: kill-kas, select: {fraction: 2}}",
			`x.yaml:6:52: faults[0].select.fraction: bad fraction "2" (want a number above 0 and at most 1)`},
		{"two selections", "{at: 1s, process: kill-kas, select: {kas: 1, count: 1}}",
			"x.yaml:6:41: faults[0].select: set one of count, fraction, kas and agents"},
		{"empty selection", "{at: 1s, process: kill-kas, select: {}}",
			"x.yaml:6:41: faults[0].select: empty: leave select out to pick every instance"},
		{"selection not a mapping", "{at: 1s, process: kill-kas, select: 1}",
			"x.yaml:6:41: faults[0].select: want a mapping with keys count, fraction, kas, agents"},
		{"bad agents on a link", "{at: 1s, link: agent->kas, type: link-down, select: {agents: 11}}",
			"x.yaml:6:66: faults[0].select.agents: no agent 11 (the topology has agents 1..10)"},
		{"rolling restart of too many", "{at: 1s, process: restart-agents, params: {mode: rolling, interval: 1s}, select: {count: 99}}",
			"x.yaml:6:86: faults[0].select.count: count 99 is more than the 10 agents"},
		{"rolling restart bad interval", "{at: 1s, process: restart-agents, params: {mode: rolling, interval: x}}",
			`x.yaml:6:73: faults[0].params.interval: bad duration "x" (want e.g. 100ms or 2s)`},
		{"process type as link type", "{at: 1s, link: agent->kas, type: kill-kas}",
			"x.yaml:6:38: faults[0].type: kill-kas is a process fault: write process: kill-kas, without link and type"},
		{"link type as process", "{at: 1s, process: latency}",
			"x.yaml:6:23: faults[0].process: latency is a link fault: write link: LINK and type: latency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(head+"  - "+tc.fault+"\n"))
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("errors:\n%s\nwant exactly:\n%s", got, tc.want)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
				t.Errorf("%d errors, want 1", n)
			}
		})
	}
}
