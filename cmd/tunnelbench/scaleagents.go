package main

import (
	"context"
	"flag"
	"io"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// runScaleAgents is the hidden command that `bench` starts for the scale case: it runs the agents of a
// step in their own process, reports its heap once they are connected, and runs until SIGTERM.
func runScaleAgents(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tunnelbench scale-agents", flag.ContinueOnError)
	cli.SetUsage(fs, "tunnelbench scale-agents runs agents for the scale case of `tunnelbench bench`; it is not meant to be run by hand.")
	addr := fs.String("kas-address", "", "kas agent API address")
	count := fs.Int("count", 0, "agents to run, ids 1..count")
	tunnels := fs.Int("tunnels", bench.DefaultTunnelsPerAgent, "idle tunnels per agent")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	if *addr == "" || *count < 1 || *tunnels < 1 {
		return cli.Usagef("need --kas-address, --count >= 1 and --tunnels >= 1")
	}
	return bench.RunScaleAgents(ctx, *addr, *count, *tunnels, stdout)
}
