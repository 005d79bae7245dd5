package chaos

import "context"

// StopKas shuts the selected kas down gracefully (Target.StopKas). Not reversible. No params.
type StopKas struct{}

func init() { RegisterProcess("stop-kas", noParams(&StopKas{})) }

func (*StopKas) Type() string     { return "stop-kas" }
func (*StopKas) Selects() Selects { return SelectsKas }
func (*StopKas) Reversible() bool { return false }
func (*StopKas) Apply(ctx context.Context, t Target, sel Select) error {
	return eachKas(ctx, t, sel, "stop", t.StopKas)
}
func (*StopKas) Remove(context.Context, Target, Select) error { return errNotReversible }
