package chaos

import "context"

// StartRedis starts the tracker's Redis (Target.StartRedis), after a stop-redis without a duration.
// Not reversible. No params, no selection.
type StartRedis struct{}

func init() { RegisterProcess("start-redis", noParams(&StartRedis{})) }

func (*StartRedis) Type() string                                        { return "start-redis" }
func (*StartRedis) Selects() Selects                                    { return SelectsNothing }
func (*StartRedis) Reversible() bool                                    { return false }
func (*StartRedis) Apply(ctx context.Context, t Target, _ Select) error { return startRedis(ctx, t) }
func (*StartRedis) Remove(context.Context, Target, Select) error        { return errNotReversible }
