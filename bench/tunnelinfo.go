package bench

import (
	"fmt"

	"github.com/tunnelbench/tunnelbench/bench/tunnels"
)

// TunnelInfo is one tunnel a run measured: what it is and what its agents cost idle.
type TunnelInfo struct {
	// Name is its --tunnels name (bench/tunnels' registry).
	Name string `json:"name"`
	// Kind is project (this project's tunnel in one of its modes), peer or baseline (direct gRPC).
	Kind string `json:"kind"`
	// About says what it is: for a peer, its module and version.
	About string `json:"about"`
	// Idle is what its connected, idle agents cost, per agent (bench/tunnels.IdleCost); absent when the
	// run did not measure it (--target, --processes).
	Idle *tunnels.IdleCost `json:"idle,omitempty"`
	// Restarts counts the times the run started it anew after it stalled, so that the next case found
	// a working tunnel.
	Restarts int `json:"restarts,omitempty"`
}

// StallResult is a case whose tunnel stopped completing calls (bench/tunnels.Stall, in seconds).
type StallResult struct {
	// Round is the turn it stalled in: 0 for the warm-up, 1 to Settings.Rounds for a timed round.
	Round int `json:"round"`
	// AfterS is how long no call had completed when the watchdog stopped the load.
	AfterS float64 `json:"after_s"`
	// Completed is how many calls of the turn completed before.
	Completed int64 `json:"completed"`
	// DumpPath is the goroutine dump taken at the stall (runtime/pprof, debug=2); empty when it could
	// not be written.
	DumpPath string `json:"dump_path"`
	// DumpError is why the dump could not be written, when it could not.
	DumpError string `json:"dump_error,omitempty"`
	// Abandoned says that the stalled calls had not returned within the watchdog's bound after being
	// cancelled: their goroutines were left to the tunnel's restart or close.
	Abandoned bool `json:"abandoned,omitempty"`
}

func stallResult(round int, s *tunnels.Stall) *StallResult {
	return &StallResult{Round: round, AfterS: s.After.Seconds(), Completed: s.Completed, DumpPath: s.DumpPath, Abandoned: s.Abandoned}
}

// Text says what happened in one line: "stalled in round 2 after 10.0 s without a completed call
// (1532 calls before); goroutines in PATH".
func (s *StallResult) Text() string {
	turn := "the warm-up"
	if s.Round > 0 {
		turn = fmt.Sprintf("round %d", s.Round)
	}
	msg := fmt.Sprintf("stalled in %s: no call completed for %.1f s (%d calls before)", turn, s.AfterS, s.Completed)
	if s.DumpPath != "" {
		msg += "; goroutines in " + s.DumpPath
	} else {
		msg += "; no goroutine dump (" + s.DumpError + ")"
	}
	if s.Abandoned {
		msg += "; its calls did not end when cancelled"
	}
	return msg
}

// Stalls lists the stalled cases, one line each: "name: Text()".
func (s *Summary) Stalls() []string {
	var out []string
	for _, c := range s.Cases {
		if c.Stall != nil {
			out = append(out, c.Name+": "+c.Stall.Text())
		}
	}
	return out
}

// stalledHeadline says plainly what stalls mean for the run.
func (s *Summary) stalledHeadline() string {
	n := len(s.Stalls())
	what := "1 case"
	if n != 1 {
		what = fmt.Sprintf("%d cases", n)
	}
	return fmt.Sprintf("STALLED: %s of %d: the tunnel stopped completing calls under the case's load, and a stalled case "+
		"has no figures. A stall is a result about that tunnel, not a failure of the run: the run went on with the next case.",
		what, len(s.Cases))
}
