// Command agentk dials out to kas and serves the calls kas routes to it. See core/agentk.
package main

import (
	"context"
	"os"

	"github.com/tunnelbench/tunnelbench/core/agentk"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

func main() {
	cli.Main("agentk", func(ctx context.Context, args []string) error {
		return agentk.Main(ctx, args, os.Stdout, os.Stderr)
	})
}
