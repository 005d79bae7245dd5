package scenario

import (
	"fmt"
	"slices"
	"time"

	"github.com/tunnelbench/tunnelbench/chaos"
)

// Defaults of keys a file may leave out.
const (
	DefaultKas             = 1
	DefaultAgents          = 1
	DefaultTunnelsPerAgent = 2
	// DefaultMaxConnectionAge 0: kas never rotates agent connections during a scenario.
	DefaultMaxConnectionAge = 0
	// DefaultFindTimeout is the tunnel core's default find timeout.
	DefaultFindTimeout = 20 * time.Second
	DefaultTracker     = TrackerMemory
	DefaultShape       = "unary"
	DefaultPayload     = 1 << 10
	DefaultCallTimeout = 10 * time.Second
	DefaultEntry       = EntryAll
	DefaultTargets     = TargetsAll
)

// Limits of what a file may ask for.
const (
	MaxKas             = 32
	MaxAgents          = 10000
	MaxTunnelsPerAgent = 500
	MaxPayload         = 4 << 20 // kas's default max message size
	MaxDuration        = time.Hour
	// MinMaxConnectionAge keeps rotation slower than a few round trips.
	MinMaxConnectionAge = 500 * time.Millisecond
	// MaxFileSize bounds what Load reads.
	MaxFileSize = 1 << 20
)

// Shapes are the call shapes a load may use (bench/load's Shape values).
var Shapes = []string{"unary", "server-stream", "client-stream", "bidi", "sleep"}

// Scenario is one loaded, checked scenario file.
type Scenario struct {
	// File is the name the scenario was loaded from, as given to Load or Parse.
	File        string
	Name        string
	Description string
	Topology    Topology
	Load        Workload
	Faults      []Fault
	Expect      []Objective
}

// Tracker is the agent directory several kas share.
type Tracker string

// Trackers.
const (
	TrackerMemory Tracker = "memory"
	TrackerRedis  Tracker = "redis"
)

// Topology is what the harness starts.
type Topology struct {
	Kas             int
	Agents          int
	TunnelsPerAgent int
	// MaxConnectionAge 0 means kas never rotates agent connections.
	MaxConnectionAge time.Duration
	FindTimeout      time.Duration
	Tracker          Tracker
}

// HomeKas is the kas agent id connects to first: agents are spread round-robin, agent 1 on kas 0.
func (t Topology) HomeKas(id int64) int { return int((id - 1) % int64(t.Kas)) }

// AgentIDs lists the agent ids, 1..Agents.
func (t Topology) AgentIDs() []int64 {
	ids := make([]int64, t.Agents)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	return ids
}

// EntryAll spreads callers over every live kas.
const EntryAll = -1

// Targets says which agents the load calls.
type Targets string

// Targets.
const (
	TargetsAll Targets = "all"
	// TargetsLocal: agents homed at the entry kas, so that calls route without another kas.
	TargetsLocal Targets = "local"
	// TargetsRemote: agents homed elsewhere, so that every call takes a kas->kas hop.
	TargetsRemote Targets = "remote"
)

// Workload is the traffic driven through the topology.
type Workload struct {
	Shape   string
	Payload int
	// Rate is calls per second (open loop); 0 when Workers is set.
	Rate float64
	// Workers is the number of closed-loop workers; 0 when Rate is set.
	Workers     int
	Duration    time.Duration
	CallTimeout time.Duration
	// Entry is the kas index where callers enter, or EntryAll.
	Entry   int
	Targets Targets
}

// TargetAgents lists the agents the load calls in topology t.
func (l Workload) TargetAgents(t Topology) []int64 {
	var out []int64
	for _, id := range t.AgentIDs() {
		home := t.HomeKas(id)
		if l.Targets == TargetsAll || l.Targets == TargetsLocal && home == l.Entry || l.Targets == TargetsRemote && home != l.Entry {
			out = append(out, id)
		}
	}
	return out
}

// Fault is one entry of the timeline: a link fault (Link and Network set) or a process fault
// (Process set).
type Fault struct {
	// Line is where the fault starts in the file.
	Line int
	At   time.Duration
	// For is how long the fault lasts; 0: a link fault lasts to the end of the load, a process fault
	// is not undone.
	For      time.Duration
	Link     chaos.Link
	Type     string
	Params   chaos.Params
	Select   chaos.Select
	Deadline time.Duration
	Network  chaos.Fault
	Process  chaos.Process
}

// End is when the fault ends (is removed) within a load of duration d, or -1 for a process fault
// that is not undone.
func (f Fault) End(d time.Duration) time.Duration {
	switch {
	case f.For > 0:
		return f.At + f.For
	case f.Network != nil:
		return d
	}
	return -1
}

// String describes the fault for logs and reports: "10s+5s agent->kas latency (fraction 0.2)".
func (f Fault) String() string {
	s := f.At.String()
	if f.For > 0 {
		s += "+" + f.For.String()
	}
	if f.Link != "" {
		s += " " + string(f.Link)
	}
	return fmt.Sprintf("%s %s (%s)", s, f.Type, f.Select)
}

// AffectedAgents lists the agents some fault acts on: selected on the agent->kas link, or by an
// agent process fault. ok is false when that depends on the run (an agent->kas fault that selects
// by kas).
func (s *Scenario) AffectedAgents() (ids []int64, ok bool) {
	all := s.Topology.AgentIDs()
	seen := make(map[int64]bool)
	for _, f := range s.Faults {
		agentFault := f.Link == chaos.LinkAgentKas || f.Process != nil && f.Process.Selects() == chaos.SelectsAgents
		if !agentFault {
			continue
		}
		if len(f.Select.Kas) > 0 {
			return nil, false
		}
		picked, err := f.Select.PickAgents(all)
		if err != nil {
			return nil, false
		}
		for _, id := range picked {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids, true
}
