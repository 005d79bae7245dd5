package chaos

import (
	"slices"
	"strings"
	"testing"
)

func TestSelectN(t *testing.T) {
	for _, tc := range []struct {
		s    Select
		n    int
		want int
	}{
		{Select{}, 10, 10},
		{Select{Count: 3}, 10, 3},
		{Select{Count: 30}, 10, 10},
		{Select{Fraction: 0.3}, 10, 3},
		{Select{Fraction: 0.25}, 10, 3},
		{Select{Fraction: 0.01}, 10, 1},
		{Select{Fraction: 1}, 10, 10},
		{Select{Fraction: 0.1}, 1000, 100},
	} {
		if got := tc.s.N(tc.n); got != tc.want {
			t.Errorf("%s of %d = %d; want %d", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestSelectValidate(t *testing.T) {
	for _, tc := range []struct {
		s    Select
		want string
	}{
		{Select{Count: 1, Fraction: 0.5}, "select at most one of count, fraction, kas and agents"},
		{Select{Count: -1}, "count must be positive"},
		{Select{Fraction: 1.5}, "fraction must be in (0, 1]"},
		{Select{Kas: []int{-1}}, "kas index must not be negative"},
		{Select{Agents: []int64{0}}, "agent ids start at 1"},
	} {
		if err := tc.s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.s, err, tc.want)
		}
	}
}

func TestSelectPick(t *testing.T) {
	all := []int64{1, 2, 3, 4, 5}
	if got, err := (Select{Fraction: 0.4}).PickAgents(all); err != nil || !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("fraction 0.4 of 5 agents = %v, %v", got, err)
	}
	if _, err := (Select{Agents: []int64{9}}).PickAgents(all); err == nil || !strings.Contains(err.Error(), "no agent 9 (agents are 1..5)") {
		t.Errorf("unknown agent: %v", err)
	}
	if _, err := (Select{Kas: []int{0}}).PickAgents(all); err == nil {
		t.Error("agents picked by kas")
	}
	if got, err := (Select{}).PickKas(3); err != nil || !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("all of 3 kas = %v, %v", got, err)
	}
	if _, err := (Select{Kas: []int{3}}).PickKas(3); err == nil || !strings.Contains(err.Error(), "no kas 3 (kas indices are 0..2)") {
		t.Errorf("unknown kas: %v", err)
	}
}

// Proxies per (agent, kas) pair are grouped by agent; kas selections pick the destination.
func TestSelectProxies(t *testing.T) {
	var all []*Proxy
	for a := int64(1); a <= 3; a++ {
		for k := range 2 {
			all = append(all, &Proxy{link: LinkAgentKas, name: AgentName(a) + "/" + KasName(k)})
		}
	}
	names := func(s Select) string {
		ps, err := s.proxies(all)
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.name)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		s    Select
		want string
	}{
		{Select{Count: 1}, "agent-1/kas-0 agent-1/kas-1"},
		{Select{Fraction: 0.5}, "agent-1/kas-0 agent-1/kas-1 agent-2/kas-0 agent-2/kas-1"},
		{Select{Agents: []int64{3}}, "agent-3/kas-0 agent-3/kas-1"},
		{Select{Kas: []int{1}}, "agent-1/kas-1 agent-2/kas-1 agent-3/kas-1"},
		{Select{Kas: []int{2}}, "error: no proxy leads to kas-2"},
		{Select{Agents: []int64{4}}, "error: no proxy of agent-4"},
	} {
		if got := names(tc.s); got != tc.want {
			t.Errorf("%s: %s; want %s", tc.s, got, tc.want)
		}
	}
	if _, err := (Select{}).proxies(nil); err == nil || err.Error() != "the link has no proxies" {
		t.Errorf("empty link: %v", err)
	}
}
