// Command kas accepts tunnels from agents and routes gRPC calls to them. See core/kas.
package main

import (
	"context"
	"os"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

func main() {
	cli.Main("kas", func(ctx context.Context, args []string) error {
		return kas.Main(ctx, args, os.Stdout, os.Stderr)
	})
}
