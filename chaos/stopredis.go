package chaos

import (
	"context"
	"fmt"
)

// StopRedis stops the tracker's Redis (Target.StopRedis). Reversible: at the end of the fault's
// duration Redis starts again (Target.StartRedis). No params, no selection.
type StopRedis struct{}

func init() { RegisterProcess("stop-redis", noParams(&StopRedis{})) }

func (*StopRedis) Type() string     { return "stop-redis" }
func (*StopRedis) Selects() Selects { return SelectsNothing }
func (*StopRedis) Reversible() bool { return true }
func (*StopRedis) Apply(ctx context.Context, t Target, _ Select) error {
	if err := bounded(ctx, func() error { return t.StopRedis(ctx) }); err != nil {
		return fmt.Errorf("stop redis: %w", err)
	}
	return nil
}
func (*StopRedis) Remove(ctx context.Context, t Target, _ Select) error {
	return startRedis(ctx, t)
}

func startRedis(ctx context.Context, t Target) error {
	if err := bounded(ctx, func() error { return t.StartRedis(ctx) }); err != nil {
		return fmt.Errorf("start redis: %w", err)
	}
	return nil
}
