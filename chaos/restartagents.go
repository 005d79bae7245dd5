package chaos

import (
	"context"
	"fmt"
	"time"
)

// Restart modes.
const (
	// RestartTogether restarts every selected agent at once.
	RestartTogether = "together"
	// RestartRolling restarts them one at a time, Interval apart.
	RestartRolling = "rolling"
)

// RestartAgents stops the selected agents gracefully and starts them again (Target.RestartAgents):
// all together, or rolling, one at a time with Interval between the end of one restart and the start
// of the next. Not reversible. Params: mode (together, the default, or rolling), interval (required
// for rolling, not allowed otherwise).
type RestartAgents struct {
	Mode     string
	Interval time.Duration
}

func init() { RegisterProcess("restart-agents", newRestartAgents) }

func newRestartAgents(p Params) (Process, error) {
	r := readParams(p)
	f := &RestartAgents{Mode: RestartTogether}
	if v, ok := r.value("mode"); ok {
		f.Mode = v
	}
	switch f.Mode {
	case RestartTogether:
		if _, ok := r.p["interval"]; ok {
			r.fail("interval", "only a rolling restart has an interval")
		}
		r.known = append(r.known, "interval")
	case RestartRolling:
		f.Interval = r.positiveDuration("interval", -1)
	default:
		r.fail("mode", "unknown mode %q (want together or rolling)", f.Mode)
		r.known = append(r.known, "interval")
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return f, nil
}

// Span is at least how long Apply takes on n agents: the intervals of a rolling restart.
func (f *RestartAgents) Span(n int) time.Duration {
	if f.Mode != RestartRolling || n < 2 {
		return 0
	}
	return time.Duration(n-1) * f.Interval
}

func (*RestartAgents) Type() string     { return "restart-agents" }
func (*RestartAgents) Selects() Selects { return SelectsAgents }
func (*RestartAgents) Reversible() bool { return false }
func (f *RestartAgents) Apply(ctx context.Context, t Target, sel Select) error {
	if f.Mode != RestartRolling {
		return agents(ctx, t, sel, "restart", t.RestartAgents)
	}
	ids, err := sel.PickAgents(t.Agents())
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	for i, id := range ids {
		if i > 0 {
			tm := time.NewTimer(f.Interval)
			select {
			case <-ctx.Done():
				tm.Stop()
				return fmt.Errorf("rolling restart: %d of %d agents restarted: %w", i, len(ids), context.Cause(ctx))
			case <-tm.C:
			}
		}
		if err := bounded(ctx, func() error { return t.RestartAgents(ctx, []int64{id}) }); err != nil {
			return fmt.Errorf("rolling restart: agent %d (%d of %d): %w", id, i+1, len(ids), err)
		}
	}
	return nil
}
func (*RestartAgents) Remove(context.Context, Target, Select) error { return errNotReversible }
