// Command tunnelbench is the benchmark and chaos harness of the tunnel. It is a thin shell over the
// bench package; run 'tunnelbench help' for its commands.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/tunnelbench/tunnelbench/core/agentk"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

const usage = `tunnelbench measures what the reverse gRPC tunnel costs and how it behaves.

Usage:
  tunnelbench bench [flags]    run the benchmark matrix (tunnel vs direct gRPC) and write results
  tunnelbench scenario run FILE  run one chaos scenario (faults on every link, objectives) and write results
  tunnelbench chaos            run every scenario in scenarios/ (make chaos), results in results/chaos-latest/
  tunnelbench merge RUN RUN...  merge one matrix's runs from several load hosts into one report
  tunnelbench demo-server      serve the demo service on plain gRPC (an upstream for agentk --expose)
  tunnelbench help [COMMAND]   show this help, or a command's flags (as COMMAND --help does)
  tunnelbench version          show the version (also --version, on every command)

Run 'tunnelbench help COMMAND' or 'tunnelbench COMMAND --help' for a command's flags.
`

func main() {
	cli.Main("tunnelbench", func(ctx context.Context, args []string) error {
		return run(ctx, args, os.Stdout, os.Stderr)
	})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cli.Usagef("missing command")
	}
	switch args[0] {
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "scenario":
		return runScenarioCmd(ctx, args[1:], stdout, stderr)
	case "chaos":
		return runChaos(ctx, args[1:], stdout, stderr)
	case "merge":
		return runMerge(ctx, args[1:], stdout, stderr)
	case "demo-server":
		return runDemoServer(ctx, args[1:], stdout)
	case "kas":
		// Hidden: the harness runs kas processes from its own binary (--processes).
		return kas.Main(ctx, args[1:], stdout, stderr)
	case "agentk":
		return agentk.Main(ctx, args[1:], stdout, stderr)
	case "scale-agents":
		return runScaleAgents(ctx, args[1:], stdout)
	case "idle-cost":
		return runIdleCost(ctx, args[1:], stdout)
	case "help", "-h", "--help", "-help":
		return runHelp(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, cli.Version("tunnelbench"))
		return nil
	default:
		return unknownCommand(args[0])
	}
}
