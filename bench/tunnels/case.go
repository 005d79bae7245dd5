package tunnels

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/load"
)

// Case is one load through a tunnel: closed-loop callers making one shape's calls to one agent.
type Case struct {
	// Name labels errors and the stall dump (for example "remotedialer/unary-1MiB/c16/round2").
	Name        string
	Shape       load.Shape
	Payload     int
	Concurrency int
	// Warmup calls are made first and not recorded; Duration is the timed run.
	Warmup   time.Duration
	Duration time.Duration
	// Agent is the agent called; zero means 1.
	Agent int64
}

func (c Case) validate() error {
	var errs []error
	if _, err := load.ParseShape(string(c.Shape)); err != nil {
		errs = append(errs, err)
	}
	if c.Payload < 0 {
		errs = append(errs, fmt.Errorf("payload must not be negative, got %d", c.Payload))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency must be at least 1, got %d", c.Concurrency))
	}
	if c.Warmup < 0 || c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("warm-up must not be negative and duration must be positive, got %v and %v", c.Warmup, c.Duration))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("case %s: %w", c.Name, err)
	}
	return nil
}

// CaseResult is a case's figures, or its stall.
type CaseResult struct {
	Case Case
	// Result is nil when the case stalled.
	Result *load.Result
	Stall  *Stall
}

// RunCase runs c through t, watched by w: a tunnel that stops completing calls gives a result with
// Stall set (and no figures) within the watchdog's bounds, and the next case can run.
func RunCase(ctx context.Context, t Tunnel, c Case, w Watchdog) (CaseResult, error) {
	if err := c.validate(); err != nil {
		return CaseResult{}, err
	}
	conn, err := t.Conn(max(c.Agent, 1))
	if err != nil {
		return CaseResult{}, fmt.Errorf("case %s: %w", c.Name, err)
	}
	gen := load.ClosedLoop{Workers: c.Concurrency, Warmup: c.Warmup, Duration: c.Duration}
	calls := load.NewShapeCall(c.Shape, c.Payload, conn, func(ctx context.Context) context.Context { return ctx })
	res, stall, err := RunWatched(ctx, c.Name, gen, calls, w)
	if err != nil {
		err = fmt.Errorf("case %s: %w", c.Name, err)
	}
	return CaseResult{Case: c, Result: res, Stall: stall}, err
}
