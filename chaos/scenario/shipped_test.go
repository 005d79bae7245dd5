package scenario

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/chaos"
)

// shippedDir holds the scenario files that ship with the project; their names are a contract.
const shippedDir = "../../scenarios"

var shippedNames = []string{
	"agent-blackhole", "agent-flaky", "agent-latency", "agent-rolling-restart", "bandwidth-large-messages",
	"baseline", "kas-kill", "max-connection-age", "reconnect-storm", "redis-outage",
}

func loadShipped(t *testing.T) map[string]*Scenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(shippedDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*Scenario)
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		stem := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if s.Name != stem {
			t.Errorf("%s: name %q differs from the file name", f, s.Name)
		}
		if s.File != f || s.Description == "" {
			t.Errorf("%s: file %q, description %q", f, s.File, s.Description)
		}
		if s.Load.Duration < 30*time.Second || s.Load.Duration > 60*time.Second {
			t.Errorf("%s: load lasts %s; keep scenarios between 30 s and 60 s", f, s.Load.Duration)
		}
		out[stem] = s
	}
	return out
}

func TestShippedScenarios(t *testing.T) {
	got := loadShipped(t)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, shippedNames) {
		t.Fatalf("scenarios/ holds %v; want exactly %v", names, shippedNames)
	}

	obj := func(s *Scenario, m Metric, scope Scope) *Objective {
		for i := range s.Expect {
			if s.Expect[i].Metric == m && s.Expect[i].Scope == scope {
				return &s.Expect[i]
			}
		}
		t.Fatalf("%s: no %s objective on %s calls", s.Name, m, scope)
		return nil
	}
	zeroFailed := func(s *Scenario, scope Scope) {
		if o := obj(s, FailedCalls, scope); o.Op != OpLE || o.Threshold != 0 || o.Ref != "" {
			t.Errorf("%s: failed calls objective %s; want zero", s.Name, o)
		}
	}

	// kas-kill: one of 3 kas killed; recovery within 15 s; failed calls at most those in flight.
	s := got["kas-kill"]
	if s.Topology.Kas != 3 || len(s.Faults) != 1 || s.Faults[0].Type != "kill-kas" || !slices.Equal(s.Faults[0].Select.Kas, []int{1}) {
		t.Errorf("kas-kill: %+v %v", s.Topology, s.Faults)
	}
	if o := obj(s, Recovery, ScopeAll); o.Op != OpLE || o.ThresholdDuration() != 15*time.Second {
		t.Errorf("kas-kill: %s", o)
	}
	if o := obj(s, FailedCalls, ScopeAll); o.Ref != RefInflightAtKill || o.Op != OpLE {
		t.Errorf("kas-kill: %s", o)
	}

	// max-connection-age: age 3 s under 300 calls/s, zero failed calls.
	s = got["max-connection-age"]
	if s.Topology.MaxConnectionAge != 3*time.Second || s.Load.Rate != 300 || len(s.Faults) != 0 {
		t.Errorf("max-connection-age: %+v %+v", s.Topology, s.Load)
	}
	zeroFailed(s, ScopeAll)

	// agent-latency: agent links 100 ms ± 20 ms.
	s = got["agent-latency"]
	if l, ok := s.Faults[0].Network.(*chaos.Latency); !ok || s.Faults[0].Link != chaos.LinkAgentKas || l.Latency != 100*time.Millisecond || l.Jitter != 20*time.Millisecond {
		t.Errorf("agent-latency: %v", s.Faults)
	}

	// agent-flaky and agent-blackhole: a fraction of agents; calls to the others all succeed.
	for _, n := range []string{"agent-flaky", "agent-blackhole"} {
		s = got[n]
		affected, ok := s.AffectedAgents()
		if !ok || len(affected) == 0 || len(affected) >= s.Topology.Agents {
			t.Errorf("%s: affected agents %v", n, affected)
		}
		zeroFailed(s, ScopeUnaffected)
	}
	if _, ok := got["agent-flaky"].Faults[0].Network.(*chaos.ResetPeer); !ok {
		t.Error("agent-flaky: not reset-peer")
	}
	if _, ok := got["agent-blackhole"].Faults[0].Network.(*chaos.Blackhole); !ok {
		t.Error("agent-blackhole: not a black hole")
	}

	// agent-rolling-restart: zero failed calls while agents restart one by one.
	s = got["agent-rolling-restart"]
	if r, ok := s.Faults[0].Process.(*chaos.RestartAgents); !ok || r.Mode != chaos.RestartRolling {
		t.Errorf("agent-rolling-restart: %v", s.Faults)
	}
	if s.Faults[0].Deadline != chaos.DefaultChangeDeadline+19*time.Second {
		t.Errorf("agent-rolling-restart: deadline %s does not cover the rolling restart", s.Faults[0].Deadline)
	}
	zeroFailed(s, ScopeAll)

	// redis-outage: local routing unaffected.
	s = got["redis-outage"]
	if s.Topology.Tracker != TrackerRedis || s.Load.Entry != 0 || s.Load.Targets != TargetsLocal || s.Faults[0].Type != "stop-redis" {
		t.Errorf("redis-outage: %+v %+v %v", s.Topology, s.Load, s.Faults)
	}
	if n := len(s.Load.TargetAgents(s.Topology)); n != 10 {
		t.Errorf("redis-outage: %d local agents; want 10", n)
	}
	zeroFailed(s, ScopeAll)

	// reconnect-storm: 1000 agents re-home; the reconnect rate is bounded.
	s = got["reconnect-storm"]
	if s.Topology.Agents != 1000 || s.Topology.Kas != 3 {
		t.Errorf("reconnect-storm: %+v", s.Topology)
	}
	obj(s, ReconnectRate, ScopeAll)

	// bandwidth-large-messages: large messages through a bandwidth limit.
	s = got["bandwidth-large-messages"]
	if _, ok := s.Faults[0].Network.(*chaos.Bandwidth); !ok || s.Load.Payload != 1<<20 {
		t.Errorf("bandwidth-large-messages: %+v %v", s.Load, s.Faults)
	}

	// baseline: no faults.
	if s = got["baseline"]; len(s.Faults) != 0 {
		t.Errorf("baseline has faults: %v", s.Faults)
	}
	zeroFailed(s, ScopeAll)
}
