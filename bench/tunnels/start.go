package tunnels

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultCloseTimeout bounds Close when Start fails half way.
const DefaultCloseTimeout = 30 * time.Second

// Running is a started tunnel with its agents connected, and what they cost idle.
type Running struct {
	Tunnel
	Name string
	Idle IdleCost
}

// Start starts the adapter registered as name with cfg (defaults filled in), connects its agents
// within DefaultConnectTimeout (and ctx), and measures their idle cost. The caller closes it.
func Start(ctx context.Context, name string, cfg Config) (*Running, error) {
	reg, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	return StartAdapter(ctx, name, reg.Adapter, cfg)
}

// StartAdapter is Start for an adapter that need not be registered (tests, one-off tunnels).
func StartAdapter(ctx context.Context, name string, a Adapter, cfg Config) (*Running, error) {
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("tunnel %s: %w", name, err)
	}
	t, err := a.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("tunnel %s: start: %w", name, err)
	}
	before := Snapshot()
	cctx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout)
	err = t.ConnectAgents(cctx)
	cancel()
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), DefaultCloseTimeout)
		defer cancel()
		return nil, errors.Join(fmt.Errorf("tunnel %s: connect %d agents: %w", name, cfg.Agents, err), t.Close(closeCtx))
	}
	return &Running{Tunnel: t, Name: name, Idle: idleCost(before, Snapshot(), cfg.Agents)}, nil
}
