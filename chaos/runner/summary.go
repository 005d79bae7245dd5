package runner

import (
	"github.com/tunnelbench/tunnelbench/bench/result"
	"github.com/tunnelbench/tunnelbench/internal/summaryfile"
)

// SummarySchema names the format of a scenario's summary.json. Scripts depend on it.
const SummarySchema = "tunnelbench/scenario/v1"

// Summary is summary.json of one scenario run.
type Summary struct {
	Schema      string `json:"schema"`
	Scenario    string `json:"scenario"`
	File        string `json:"file"`
	Description string `json:"description,omitempty"`
	// Tunnel names the bench/tunnels adapter the scenario ran against (scenario run --tunnel); empty
	// for this project's topology.
	Tunnel string `json:"tunnel,omitempty"`
	// NotApplied lists, with a run against Tunnel, the scenario's settings and objectives that only
	// this project's tunnel has, which the run left out (Scenario.CheckTunnel), each with why.
	NotApplied []string   `json:"not_applied,omitempty"`
	Env        result.Env `json:"env"`
	// Passed: every objective and invariant held and every fault was applied and removed.
	Passed bool `json:"passed"`
	// Failure says why the run itself failed (a fault that could not be applied or removed, an
	// invariant that broke); empty when it ran to the end.
	Failure    string            `json:"failure,omitempty"`
	Objectives []ObjectiveResult `json:"objectives"`
	Calls      Calls             `json:"calls"`
	Routing    Routing           `json:"routing"`
	// RecoveryS is the longest recovery over the faults (see FaultWindow.RecoveryS); null when the run
	// had no fault, or when calls never caught up after one of them (NotRecovered names those).
	RecoveryS *float64 `json:"recovery_s"`
	// NotRecovered names the faults after which calls never caught up within the run.
	NotRecovered []string `json:"not_recovered,omitempty"`
	// RecoveryTolerance is the rule's tolerance: a second caught up when the calls that succeeded in
	// it were at least (1 - RecoveryTolerance) of the calls offered in it (less one call) and no call
	// offered in it failed.
	RecoveryTolerance float64       `json:"recovery_tolerance"`
	Faults            []FaultWindow `json:"faults"`
	Timeline          []Second      `json:"timeline"`
}

// ObjectiveResult is one objective, or one invariant, checked.
type ObjectiveResult struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
}

// Calls counts every call the load sent: Sent = OK + sum(FailedByCode).
type Calls struct {
	Sent         int64            `json:"sent"`
	OK           int64            `json:"ok"`
	FailedByCode map[string]int64 `json:"failed_by_code"`
	// Missed counts the calls an open-loop load's schedule asked for that never started: every one of
	// its MaxInFlight calls was still running when the load ended. Sent + Missed is what was offered.
	Missed int64 `json:"missed"`
	// LatencyUs percentiles over every call, successful or not.
	LatencyUs result.Latency `json:"latency_us"`
}

// Routing is the routing kas instances' tunnel_routing_duration histogram over the run (successful
// routings), and their routing timeouts.
type Routing struct {
	BucketBoundsS []float64 `json:"bucket_bounds_s"`
	// BucketCounts has one count per bucket (not cumulative), plus one for routings above the last bound.
	BucketCounts []uint64 `json:"bucket_counts"`
	Timeouts     int64    `json:"timeouts"`
}

// FaultWindow is when one fault of the timeline was active, in seconds since the load started. A
// process fault that is not undone (a kill) has End equal to Start.
type FaultWindow struct {
	Name   string  `json:"name"`
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// RecoveryFromS is when recovery from the fault starts to count: when it was removed, or, for a
	// fault that lasted to the end of the load and for one that is not undone, when it was in place
	// (a kill done, a rolling restart over).
	RecoveryFromS float64 `json:"recovery_from_s"`
	// RecoveryS is the time from RecoveryFromS to the start of the first second from which every
	// second caught up (see Summary.RecoveryTolerance), until the next fault started or the load
	// ended; null when that never happened: not recovered.
	RecoveryS *float64 `json:"recovery_s"`
}

// Second is one second of the run.
type Second struct {
	T int `json:"t"`
	// Offered is calls scheduled to start in this second. Achieved is calls that finished in it and
	// succeeded: a failed call is never throughput. OK is the same count, under its older name.
	Offered  int64 `json:"offered"`
	Achieved int64 `json:"achieved"`
	OK       int64 `json:"ok"`
	// Failed is calls that finished in this second and failed, ByCode the same by gRPC code.
	Failed int64            `json:"failed"`
	ByCode map[string]int64 `json:"failed_by_code,omitempty"`
	// OfferedFailed is calls offered in this second that failed, whenever they ended.
	OfferedFailed int64 `json:"offered_failed"`
	// LatencyUs of the calls that finished in this second, successful or not.
	LatencyUs result.Latency `json:"latency_us"`
	// RoutingCounts is the routing histogram's increase in this second (per bucket, as in Routing).
	RoutingCounts   []uint64 `json:"routing_counts"`
	RoutingTimeouts int64    `json:"routing_timeouts"`
	TunnelsIdle     int64    `json:"tunnels_idle"`
	TunnelsBusy     int64    `json:"tunnels_busy"`
	WaitingCalls    int64    `json:"waiting_calls"`
	// NewConnections is agent connections accepted by the kas instances in this second.
	NewConnections int64    `json:"new_connections"`
	ActiveFaults   []string `json:"active_faults,omitempty"`
}

// WriteJSON writes dir/summary.json.
func (s *Summary) WriteJSON(dir string) error { return summaryfile.Write(dir, s) }

// ReadSummary reads a scenario's summary.json (or the directory holding it) and checks its schema.
func ReadSummary(path string) (*Summary, error) {
	var s Summary
	if err := summaryfile.Read(path, SummarySchema, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
