package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// runHelp is `tunnelbench help [COMMAND]`: the list of commands, or COMMAND's own --help, so that the
// two never differ and a command added to run has its help here too.
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0 || args[0] == "help" || strings.HasPrefix(args[0], "-"):
		fmt.Fprint(stdout, usage)
		return nil
	case len(args) > 1:
		return cli.Usagef("help takes one command, got %q", args)
	}
	return run(ctx, []string{args[0], "--help"}, stdout, stderr)
}

// commands are the commands the usage lists ("  tunnelbench NAME ..."), the ones a typo is matched
// against; hidden commands (kas, agentk, scale-agents) are not suggested.
func commands() []string {
	var names []string
	for _, line := range strings.Split(usage, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "tunnelbench" && strings.HasPrefix(line, "  ") {
			names = append(names, f[1])
		}
	}
	return names
}

func unknownCommand(name string) error {
	return cli.Usagef("unknown command %q%s", name, cli.DidYouMean("", cli.Suggest(strings.TrimLeft(name, "-"), commands())))
}
