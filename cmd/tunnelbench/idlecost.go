package main

import (
	"context"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// runIdleCost is the hidden command that `bench` starts to measure a tunnel's idle cost in a process of
// its own: it writes one line of JSON (tunnels.IdleCost) to stdout and exits.
func runIdleCost(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tunnelbench idle-cost", flag.ContinueOnError)
	cli.SetUsage(fs, "tunnelbench idle-cost measures a tunnel's idle agents for `tunnelbench bench`; it is not meant to be run by hand.")
	name := fs.String("tunnel", "", "the tunnel (a --tunnels name)")
	agents := fs.Int("agents", tunnels.DefaultIdleAgents, "idle agents to connect")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	if _, err := tunnels.Lookup(*name); err != nil {
		return cli.Usagef("--tunnel: %v", err)
	}
	if *agents < 1 || *agents > tunnels.MaxAgents {
		return cli.Usagef("--agents must be between 1 and %d, got %d", tunnels.MaxAgents, *agents)
	}
	// Some peers print to the process's stdout as their agents leave (openconfig/grpctunnel's server
	// does, once per agent): only the report goes there. Nothing else runs yet, so the swap races no one.
	if stdout == os.Stdout {
		os.Stdout = os.Stderr
		defer func() { os.Stdout = stdout.(*os.File) }()
	}
	return bench.RunIdleCost(ctx, *name, *agents, stdout)
}

// idleCommand measures each idle cost of `bench` in a child process of this very binary; nil (measured
// in this process) when this binary is not tunnelbench but a test of it, which has no idle-cost command.
func idleCommand() func(tunnel string, agents int) *exec.Cmd {
	self, err := os.Executable()
	if err != nil || strings.HasSuffix(filepath.Base(self), ".test") {
		return nil
	}
	return func(tunnel string, agents int) *exec.Cmd {
		return exec.Command(self, "idle-cost", "--tunnel", tunnel, "--agents", strconv.Itoa(agents))
	}
}
