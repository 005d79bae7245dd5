package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/topology/proc"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
)

// idleProcessStop bounds how long an idle-cost process may take to close its tunnel once it reported.
const idleProcessStop = tunnels.DefaultCloseTimeout

// describeTunnels lists the tunnels the groups measure, in case order (the direct baseline first), with
// what the registry says about each.
func describeTunnels(groups []Group) ([]TunnelInfo, error) {
	var names []string
	for _, g := range groups {
		for _, c := range g.Cases() {
			if name := c.Tunnel(); !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	out := make([]TunnelInfo, 0, len(names))
	for _, name := range names {
		reg, err := tunnels.Lookup(name)
		if err != nil {
			return nil, err
		}
		out = append(out, TunnelInfo{Name: name, Kind: reg.Kind.String(), About: reg.About})
	}
	return out, nil
}

// measureIdle measures each tunnel's idle cost with opts.IdleAgents agents, one tunnel at a time, in a
// child process when opts.IdleCommand is set; started is told each tunnel's name first.
func measureIdle(ctx context.Context, infos []TunnelInfo, opts Options, started func(name string)) error {
	for i := range infos {
		name := infos[i].Name
		started(name)
		var idle tunnels.IdleCost
		var err error
		if opts.IdleCommand != nil {
			idle, err = measureIdleProcess(ctx, opts.IdleCommand(name, opts.IdleAgents))
		} else {
			idle, err = MeasureIdle(ctx, name, opts.IdleAgents)
		}
		if err != nil {
			return fmt.Errorf("idle cost of %s with %d agents: %w", name, opts.IdleAgents, err)
		}
		infos[i].Idle = &idle
	}
	return nil
}

// MeasureIdle starts the tunnel name with agents idle agents, measures what they cost (tunnels.Start
// does, the same way for every tunnel), and closes it.
func MeasureIdle(ctx context.Context, name string, agents int) (tunnels.IdleCost, error) {
	r, err := tunnels.Start(ctx, name, tunnels.Config{Agents: agents})
	if err != nil {
		return tunnels.IdleCost{}, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), tunnels.DefaultCloseTimeout)
	defer cancel()
	if err := r.Close(cctx); err != nil {
		return tunnels.IdleCost{}, fmt.Errorf("close: %w", err)
	}
	return r.Idle, nil
}

// RunIdleCost is the body of an idle-cost process (tunnelbench idle-cost): it measures the tunnel
// name's idle cost with agents agents and writes it to out as one line of JSON (tunnels.IdleCost).
func RunIdleCost(ctx context.Context, name string, agents int, out io.Writer) error {
	idle, err := MeasureIdle(ctx, name, agents)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(idle)
}

// measureIdleProcess runs cmd (an idle-cost process) and reads its report.
func measureIdleProcess(ctx context.Context, cmd *exec.Cmd) (tunnels.IdleCost, error) {
	p, err := proc.StartCmd("idle-cost process", cmd)
	if err != nil {
		return tunnels.IdleCost{}, err
	}
	var line string
	werr := p.WaitReady(ctx, tunnels.DefaultConnectTimeout+idleProcessStop, func() bool {
		var ok bool
		line, _, ok = strings.Cut(p.Stdout(), "\n")
		return ok
	})
	if werr == nil {
		// It reported before closing the tunnel: let it finish, within a bound.
		select {
		case <-p.Done():
		case <-time.After(idleProcessStop):
		}
	}
	_ = p.Stop(5 * time.Second)
	if werr != nil {
		return tunnels.IdleCost{}, werr
	}
	var idle tunnels.IdleCost
	if err := json.Unmarshal([]byte(line), &idle); err != nil {
		return tunnels.IdleCost{}, fmt.Errorf("idle-cost process report %q: %w", line, err)
	}
	return idle, nil
}
