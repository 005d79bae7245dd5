package scenario

import (
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// objective keys of expect, in file order of checks; the comparison ones map to their metric.
var comparisons = map[string]Metric{
	"success_ratio":    SuccessRatio,
	"latency_p50":      LatencyP50,
	"latency_p90":      LatencyP90,
	"latency_p99":      LatencyP99,
	"routing_timeouts": RoutingTimeouts,
	"recovery":         Recovery,
	"reconnect_rate":   ReconnectRate,
}

var (
	expectKeys     = []string{"success_ratio", "latency_p50", "latency_p90", "latency_p99", "routing_timeouts", "recovery", "reconnect_rate", "max_failed", "zero_failed", "unaffected"}
	unaffectedKeys = []string{"success_ratio", "latency_p50", "latency_p90", "latency_p99", "max_failed", "zero_failed"}
)

func (p *parser) expect(n *yaml.Node, path string, scope Scope, s *Scenario) []Objective {
	keys := expectKeys
	if scope != ScopeAll {
		keys = unaffectedKeys
	}
	m, ok := p.fields(n, path, keys...)
	if !ok {
		return nil
	}
	var out []Objective
	for _, key := range keys { // a stable order, whatever the file's
		e, ok := m[key]
		if !ok {
			continue
		}
		kp := join(path, key)
		if key == "unaffected" {
			out = append(out, p.unaffected(e, kp, s)...)
			continue
		}
		v, ok := p.scalar(e, kp)
		if !ok {
			continue
		}
		o := Objective{Scope: scope, Text: v, Line: e.key.Line}
		switch key {
		case "max_failed":
			o.Metric, o.Op = FailedCalls, OpLE
			if v == string(RefInflightAtKill) {
				o.Ref = RefInflightAtKill
				if !slices.ContainsFunc(s.Faults, kills) {
					p.errf(e.val, kp, "%s needs a kill-kas or stop-kas fault", v)
					continue
				}
			} else if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
				p.errf(e.val, kp, "bad count %q (want a whole number, 0 or more, or %s)", v, RefInflightAtKill)
				continue
			} else {
				o.Threshold = float64(n)
			}
		case "zero_failed":
			if v != "true" {
				p.errf(e.val, kp, "want true (leave the key out to allow failed calls)")
				continue
			}
			o.Metric, o.Op = FailedCalls, OpLE
		default:
			o.Metric = comparisons[key]
			op, val, err := parseComparison(v)
			if err == nil {
				o.Op = op
				o.Threshold, err = parseThreshold(o.Metric, val)
			}
			if err != nil {
				p.errf(e.val, kp, "%v", err)
				continue
			}
			if (o.Metric == Recovery || o.Metric == ReconnectRate) && len(s.Faults) == 0 {
				p.errf(e.val, kp, "%s needs a fault to recover from", key)
				continue
			}
		}
		out = append(out, o)
	}
	return out
}

func kills(f Fault) bool { return f.Type == "kill-kas" || f.Type == "stop-kas" }

func (p *parser) unaffected(e entry, path string, s *Scenario) []Objective {
	affected, known := s.AffectedAgents()
	switch {
	case !known:
		p.errf(e.key, path, "which agents are affected depends on the run (an agent->kas fault selects by kas)")
		return nil
	case len(affected) == 0:
		p.errf(e.key, path, "no fault selects agents, so every call is unaffected: use the objectives above")
		return nil
	case len(affected) >= s.Topology.Agents:
		p.errf(e.key, path, "the faults select every agent: no call is unaffected")
		return nil
	}
	return p.expect(e.val, path, ScopeUnaffected, s)
}
