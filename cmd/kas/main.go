// Command kas accepts tunnels from agents and routes gRPC calls to them. See core/kas.
package main

import (
	"context"
	"os"
	"time"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

func main() {
	cli.Main("kas", run)
}

func run(ctx context.Context, args []string) error {
	cfg, err := kas.ParseArgs(args, os.Stdout, os.Stderr)
	if err != nil {
		return err
	}
	s, err := kas.New(cfg)
	if err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	cfg.Log.Info("shutting down", "grace", cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace+5*time.Second)
	defer cancel()
	s.Shutdown(sctx)
	return nil
}
