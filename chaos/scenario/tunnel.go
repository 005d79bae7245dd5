package scenario

import (
	"fmt"
	"strings"

	"github.com/tunnelbench/tunnelbench/chaos"
)

// A scenario can also run against another tunnel, through its bench/tunnels adapter (scenario run
// --tunnel NAME): one server, the scenario's agents connected to it each through a fault proxy on its
// own agent->kas link, and the load from callers in the server's process. What the scenario asks of
// the agents' links means the same there; what it asks of kas, agentk or Redis does not.

// ProjectOnly says why the fault applies to this project's tunnel only, or "" when it means the same
// for any tunnel: a link fault on agent->kas acts on the bytes of the agent's connection to the
// server side, whatever tunnel it carries. Every process fault acts on this project's kas, agentk or
// Redis, and the other links lead to or from kas.
func (f Fault) ProjectOnly() string {
	if f.Process != nil {
		switch f.Process.Selects() {
		case chaos.SelectsKas:
			return fmt.Sprintf("%s acts on kas replicas", f.Type)
		case chaos.SelectsAgents:
			return fmt.Sprintf("%s stops agentk agents (an adapter's agents do not stop one by one)", f.Type)
		}
		return fmt.Sprintf("%s acts on the Redis of kas's tracker", f.Type)
	}
	switch f.Link {
	case chaos.LinkAgentKas:
		return ""
	case chaos.LinkCallerKas:
		return fmt.Sprintf("%s on %s: an adapter's callers sit in its server's process, with no link between", f.Type, f.Link)
	}
	return fmt.Sprintf("%s on %s, a link of kas", f.Type, f.Link)
}

// ProjectOnly says why the objective is measured on this project's tunnel only (from kas's metrics),
// or "".
func (o Objective) ProjectOnly() string {
	if o.Metric == RoutingTimeouts {
		return "kas's tunnel_routing_timeout_total"
	}
	return ""
}

// TunnelError is a scenario that asks for what only this project's tunnel has, run against another
// tunnel. Its message is one line.
type TunnelError struct {
	File, Tunnel string
	// Problems are the faults and settings that apply to this project's tunnel only, each with why.
	Problems []string
}

func (e *TunnelError) Error() string {
	return fmt.Sprintf("%s: these apply to this project's tunnel only, not to %s: %s", e.File, e.Tunnel, strings.Join(e.Problems, "; "))
}

// CheckTunnel checks that the scenario can run against tunnel, a bench/tunnels adapter (never this
// project's full topology): a *TunnelError names every fault and topology setting that applies to
// this project's tunnel only (a tracker, max connection age). notApplied lists what the run leaves out
// instead, each with why: the settings of kas and agentk that the adapter's tunnel does not have (it
// runs with its own, and one server however many kas the scenario has) and the objectives measured
// from kas's metrics.
func (s *Scenario) CheckTunnel(tunnel string) (notApplied []string, err error) {
	var problems []string
	t := s.Topology
	if t.Tracker != TrackerMemory {
		problems = append(problems, fmt.Sprintf("topology tracker: %s: the tracker of several kas", t.Tracker))
	}
	if t.MaxConnectionAge > 0 {
		problems = append(problems, fmt.Sprintf("topology max_connection_age: %s: kas rotating agent connections", t.MaxConnectionAge))
	}
	for _, f := range s.Faults {
		if why := f.ProjectOnly(); why != "" {
			problems = append(problems, fmt.Sprintf("line %d: fault %s", f.Line, why))
		}
	}
	if len(problems) > 0 {
		return nil, &TunnelError{File: s.File, Tunnel: tunnel, Problems: problems}
	}
	if t.Kas > 1 {
		// The agents' links are what the faults act on: they mean the same whether the agents share one
		// server or are spread over several.
		notApplied = append(notApplied, fmt.Sprintf("kas: %d (%s has one server: every agent connects to it)", t.Kas, tunnel))
	}
	notApplied = append(notApplied,
		fmt.Sprintf("tunnels_per_agent: %d (agentk's idle tunnels; %s keeps what it keeps)", t.TunnelsPerAgent, tunnel),
		fmt.Sprintf("find_timeout: %s (how long kas waits for a tunnel)", t.FindTimeout),
	)
	for _, o := range s.Expect {
		if why := o.ProjectOnly(); why != "" {
			notApplied = append(notApplied, fmt.Sprintf("objective %s (%s)", o, why))
		}
	}
	return notApplied, nil
}
