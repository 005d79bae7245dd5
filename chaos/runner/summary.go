package runner

import (
	"github.com/tunnelbench/tunnelbench/bench/result"
	"github.com/tunnelbench/tunnelbench/internal/summaryfile"
)

// SummarySchema names the format of a scenario's summary.json. Scripts depend on it.
const SummarySchema = "tunnelbench/scenario/v1"

// Summary is summary.json of one scenario run.
type Summary struct {
	Schema      string     `json:"schema"`
	Scenario    string     `json:"scenario"`
	File        string     `json:"file"`
	Description string     `json:"description,omitempty"`
	Env         result.Env `json:"env"`
	// Passed: every objective and invariant held and every fault was applied and removed.
	Passed bool `json:"passed"`
	// Failure says why the run itself failed (a fault that could not be applied or removed, an
	// invariant that broke); empty when it ran to the end.
	Failure    string            `json:"failure,omitempty"`
	Objectives []ObjectiveResult `json:"objectives"`
	Calls      Calls             `json:"calls"`
	Routing    Routing           `json:"routing"`
	// RecoveryS is the longest time, over the faults, from a fault's end until no call started after it
	// failed; null when no fault ended during the load.
	RecoveryS *float64      `json:"recovery_s"`
	Faults    []FaultWindow `json:"faults"`
	Timeline  []Second      `json:"timeline"`
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
}

// Second is one second of the run.
type Second struct {
	T int `json:"t"`
	// Offered is calls scheduled to start in this second; Achieved calls that finished in it.
	Offered  int64            `json:"offered"`
	Achieved int64            `json:"achieved"`
	OK       int64            `json:"ok"`
	ByCode   map[string]int64 `json:"failed_by_code,omitempty"`
	// LatencyUs of the calls that finished in this second.
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
