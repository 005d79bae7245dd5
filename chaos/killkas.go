package chaos

import "context"

// KillKas ends the selected kas abruptly (Target.KillKas): agents must re-home to the survivors.
// Not reversible. No params.
type KillKas struct{}

func init() { RegisterProcess("kill-kas", noParams(&KillKas{})) }

func (*KillKas) Type() string     { return "kill-kas" }
func (*KillKas) Selects() Selects { return SelectsKas }
func (*KillKas) Reversible() bool { return false }
func (*KillKas) Apply(ctx context.Context, t Target, sel Select) error {
	return eachKas(ctx, t, sel, "kill", t.KillKas)
}
func (*KillKas) Remove(context.Context, Target, Select) error { return errNotReversible }
