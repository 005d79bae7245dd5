// Command agentk dials out to kas and serves the calls kas routes to it. See core/agentk.
package main

import (
	"context"
	"os"
	"time"

	"github.com/tunnelbench/tunnelbench/core/agentk"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// stopGrace is how long calls in flight may run after SIGTERM.
const stopGrace = 30 * time.Second

func main() {
	cli.Main("agentk", run)
}

func run(ctx context.Context, args []string) error {
	cfg, err := agentk.ParseArgs(args, os.Stdout, os.Stderr)
	if err != nil {
		return err
	}
	a, err := agentk.New(cfg)
	if err != nil {
		return err
	}
	if err := a.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	cfg.Log.Info("stopping: calls in flight may finish", "grace", stopGrace)
	sctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	a.Stop(sctx)
	return nil
}
