package demo

import (
	"flag"
	"io"

	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// DefaultServerListen is where tunnelbench demo-server listens without --listen.
const DefaultServerListen = "127.0.0.1:9000"

// ServerArgs is tunnelbench demo-server's command line.
type ServerArgs struct {
	// Listen is the address of the plain gRPC listener (--listen).
	Listen string
}

// ParseServerArgs parses tunnelbench demo-server's command line, apart from running it so that a
// command line can be checked before it runs (deploy/ checks the Kubernetes manifests' with it).
// Problems come back as a cli.UsageError; --help prints the usage to stdout and returns cli.ErrHelp.
func ParseServerArgs(args []string, stdout io.Writer) (ServerArgs, error) {
	fs := flag.NewFlagSet("tunnelbench demo-server", flag.ContinueOnError)
	cli.SetUsage(fs, `
tunnelbench demo-server serves the demo service (tunnelbench.demo.v1.Demo), gRPC health and server
reflection on a plain gRPC listener, for example as an upstream for agentk --expose.

Usage: tunnelbench demo-server [--listen ADDR]`)
	var a ServerArgs
	fs.StringVar(&a.Listen, "listen", DefaultServerListen, "address to listen on")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return ServerArgs{}, err
	}
	return a, nil
}
