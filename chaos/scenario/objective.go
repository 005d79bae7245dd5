package scenario

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Metric is what an objective measures.
type Metric string

// Metrics.
const (
	// SuccessRatio: calls that succeeded / calls, in [0, 1].
	SuccessRatio Metric = "success_ratio"
	// LatencyP50, LatencyP90, LatencyP99: call latency percentiles, in seconds.
	LatencyP50 Metric = "latency_p50"
	LatencyP90 Metric = "latency_p90"
	LatencyP99 Metric = "latency_p99"
	// RoutingTimeouts: tunnel_routing_timeout_total over the run, summed over every kas.
	RoutingTimeouts Metric = "routing_timeouts"
	// Recovery: for each fault, the time from its end (from when it was in place, for a fault that
	// lasts to the end of the load or is not undone) until calls caught up again, in seconds, by the
	// rule in the package doc; the objective holds for the slowest, and fails when one never caught up.
	Recovery Metric = "recovery"
	// FailedCalls: calls that did not succeed.
	FailedCalls Metric = "failed_calls"
	// ReconnectRate: the peak rate of new agent connections, summed over every kas, counted in
	// 100 ms windows and given per second.
	ReconnectRate Metric = "reconnect_rate"
)

// IsDuration reports whether the metric is a time, measured in seconds.
func (m Metric) IsDuration() bool {
	return m == LatencyP50 || m == LatencyP90 || m == LatencyP99 || m == Recovery
}

// Scope is which calls an objective counts.
type Scope string

// Scopes.
const (
	ScopeAll Scope = "all"
	// ScopeUnaffected: calls to agents no fault selected (Scenario.AffectedAgents).
	ScopeUnaffected Scope = "unaffected"
)

// Op compares a measured value with a threshold.
type Op string

// Ops.
const (
	OpLT Op = "<"
	OpLE Op = "<="
	OpEQ Op = "=="
	OpGE Op = ">="
	OpGT Op = ">"
)

// Ref names a threshold the runner measures during the run.
type Ref string

// RefInflightAtKill is the number of calls in flight at any moment while a kas or agent was being
// killed (a kill takes milliseconds: listeners, then connections, then tracker entries), or at the
// moment a graceful stop began, summed over such faults. A call is in flight from the moment it chooses
// the kas it enters at.
const RefInflightAtKill Ref = "inflight_at_kill"

// Objective is one check of a run: Metric Op Threshold, over the calls of Scope.
type Objective struct {
	Metric Metric
	Scope  Scope
	Op     Op
	// Threshold is a ratio, a count, or seconds for durations; unused when Ref is set.
	Threshold float64
	// Ref, when set, names a threshold the runner measures.
	Ref Ref
	// Text is the objective as written, for reports.
	Text string
	Line int
}

// Compare reports whether actual Op threshold holds.
func (o Objective) Compare(actual, threshold float64) bool {
	switch o.Op {
	case OpLT:
		return actual < threshold
	case OpLE:
		return actual <= threshold
	case OpEQ:
		return actual == threshold
	case OpGE:
		return actual >= threshold
	case OpGT:
		return actual > threshold
	}
	return false
}

// Met reports whether actual meets the objective; refs gives the value of a Ref threshold.
func (o Objective) Met(actual float64, refs map[Ref]float64) (bool, error) {
	threshold := o.Threshold
	if o.Ref != "" {
		v, ok := refs[o.Ref]
		if !ok {
			return false, fmt.Errorf("objective %s: %s was not measured", o, o.Ref)
		}
		threshold = v
	}
	return o.Compare(actual, threshold), nil
}

// ThresholdDuration is the threshold of a duration metric.
func (o Objective) ThresholdDuration() time.Duration {
	return time.Duration(o.Threshold * float64(time.Second))
}

// String is "success_ratio >= 0.999", prefixed with the scope when it is not all calls.
func (o Objective) String() string {
	s := fmt.Sprintf("%s %s %s", o.Metric, o.Op, o.threshold())
	if o.Scope != ScopeAll {
		s = string(o.Scope) + " " + s
	}
	return s
}

func (o Objective) threshold() string {
	switch {
	case o.Ref != "":
		return string(o.Ref)
	case o.Metric.IsDuration():
		return o.ThresholdDuration().String()
	}
	return strconv.FormatFloat(o.Threshold, 'g', -1, 64)
}

// parseComparison splits "<= 500ms" into its operator and value.
func parseComparison(s string) (Op, string, error) {
	t := strings.TrimSpace(s)
	for _, op := range []Op{OpLE, OpGE, OpEQ, OpLT, OpGT} {
		if v, ok := strings.CutPrefix(t, string(op)); ok {
			v = strings.TrimSpace(v)
			if v == "" {
				break
			}
			return op, v, nil
		}
	}
	return "", "", fmt.Errorf("bad objective %q (want an operator and a value, e.g. \">= 0.999\" or \"<= 500ms\")", s)
}

// parseThreshold parses the value of an objective on m.
func parseThreshold(m Metric, v string) (float64, error) {
	switch {
	case m.IsDuration():
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("bad duration %q (want e.g. 500ms or 15s)", v)
		}
		return d.Seconds(), nil
	case m == SuccessRatio:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			return 0, fmt.Errorf("bad ratio %q (want a number from 0 to 1, e.g. 0.999)", v)
		}
		return f, nil
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad count %q (want a whole number, 0 or more)", v)
		}
		return float64(n), nil
	}
}
