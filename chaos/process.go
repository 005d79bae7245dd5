package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Target is what process faults act on; the harness implements it on a live topology. Kas are
// numbered 0..KasCount()-1 and agents by their ids; the numbers never shift when a process dies.
// Every method returns when the change is done or ctx ends, with an error that says why it failed.
type Target interface {
	// KasCount is the number of kas slots, dead or alive.
	KasCount() int
	// Agents lists the agent ids, dead or alive, in a stable order.
	Agents() []int64
	// KillKas ends kas i abruptly: listeners and connections close at once, nothing is drained, no
	// tracker record is removed; calls in flight fail.
	KillKas(ctx context.Context, i int) error
	// StopKas shuts kas i down gracefully: it stops accepting, lets calls in flight finish, and tells
	// agents to go away.
	StopKas(ctx context.Context, i int) error
	// KillAgents ends agents abruptly: their connections close at once; calls in flight fail.
	KillAgents(ctx context.Context, ids []int64) error
	// StartAgents starts agents that were killed; it returns once they are started, not connected.
	StartAgents(ctx context.Context, ids []int64) error
	// RestartAgents stops agents gracefully (calls in flight finish) and starts them again; it returns
	// once they are started, not connected.
	RestartAgents(ctx context.Context, ids []int64) error
	// StopRedis stops the Redis server of the tracker (clients see connections refused).
	StopRedis(ctx context.Context) error
	// StartRedis starts it again, with its data lost, and returns once it accepts connections.
	StartRedis(ctx context.Context) error
}

// Selects is what a Select picks for a process fault.
type Selects int

// What process faults select.
const (
	// SelectsNothing: the fault takes no selection (Redis).
	SelectsNothing Selects = iota
	// SelectsKas: kas indices; a selection is required (no fault kills every kas by default).
	SelectsKas
	// SelectsAgents: agent ids; no selection means every agent.
	SelectsAgents
)

// Process is a process fault. Apply acts on the processes sel picks (resolved against t); Remove
// undoes the fault at the end of its duration, for reversible faults only. Both are bounded by ctx.
type Process interface {
	// Type is the name the fault registered under ("kill-kas").
	Type() string
	// Selects says what sel picks.
	Selects() Selects
	// Reversible reports whether the fault may last (a scenario's `for`): Remove then undoes it.
	Reversible() bool
	Apply(ctx context.Context, t Target, sel Select) error
	Remove(ctx context.Context, t Target, sel Select) error
}

// ProcessConstructor builds a process fault from its params, like FaultConstructor.
type ProcessConstructor func(Params) (Process, error)

var processes = registry[ProcessConstructor]{kind: "process fault"}

// RegisterProcess makes a process fault type available to NewProcess. It panics on a duplicate name.
func RegisterProcess(typ string, c ProcessConstructor) { processes.register(typ, c) }

// ProcessTypes lists the registered process fault types, sorted.
func ProcessTypes() []string { return processes.names() }

// NewProcess builds a process fault of type typ from params; problems are reported as in NewFault.
func NewProcess(typ string, params Params) (Process, error) {
	c, err := processes.get(typ)
	if err != nil {
		return nil, err
	}
	return c(params)
}

// errNotReversible is what Remove returns for faults that cannot be undone.
var errNotReversible = errors.New("this fault cannot be undone")

// noParams is the constructor of a process fault without params.
func noParams(p Process) ProcessConstructor {
	return func(params Params) (Process, error) {
		if err := readParams(params).done(); err != nil {
			return nil, err
		}
		return p, nil
	}
}

// eachKas runs fn on every kas sel picks, at once, each bounded by ctx.
func eachKas(ctx context.Context, t Target, sel Select, what string, fn func(context.Context, int) error) error {
	if sel.IsZero() {
		return fmt.Errorf("%s: select the kas to act on", what)
	}
	ks, err := sel.PickKas(t.KasCount())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, k := range ks {
		wg.Go(func() {
			if err := bounded(ctx, func() error { return fn(ctx, k) }); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s kas %d: %w", what, k, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// agents runs fn on the agents sel picks, bounded by ctx.
func agents(ctx context.Context, t Target, sel Select, what string, fn func(context.Context, []int64) error) error {
	ids, err := sel.PickAgents(t.Agents())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := bounded(ctx, func() error { return fn(ctx, ids) }); err != nil {
		return fmt.Errorf("%s agents %s: %w", what, idList(ids), err)
	}
	return nil
}

// idList writes ids compactly for messages: "1, 2, 3" or "1, 2, 3, ... (40 agents)".
func idList(ids []int64) string {
	const show = 8
	s := ""
	for i, id := range ids {
		if i == show {
			return fmt.Sprintf("%s, ... (%d agents)", s, len(ids))
		}
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(id)
	}
	return s
}
