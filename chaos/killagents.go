package chaos

import "context"

// KillAgents ends the selected agents abruptly (Target.KillAgents). Reversible: at the end of the
// fault's duration they are started again (Target.StartAgents). No params.
type KillAgents struct{}

func init() { RegisterProcess("kill-agents", noParams(&KillAgents{})) }

func (*KillAgents) Type() string     { return "kill-agents" }
func (*KillAgents) Selects() Selects { return SelectsAgents }
func (*KillAgents) Reversible() bool { return true }
func (*KillAgents) Apply(ctx context.Context, t Target, sel Select) error {
	return agents(ctx, t, sel, "kill", t.KillAgents)
}
func (*KillAgents) Remove(ctx context.Context, t Target, sel Select) error {
	return agents(ctx, t, sel, "start", t.StartAgents)
}
