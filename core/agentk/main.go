package agentk

import (
	"context"
	"io"
	"time"

	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// StopGrace is how long calls in flight may run after SIGTERM.
const StopGrace = 30 * time.Second

// Main runs an agentk from its command line until ctx ends, then stops it gracefully. It is cmd/agentk,
// as a function, so that other binaries (the harness) can run an agent process too.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := ParseArgs(args, stdout, stderr)
	if err != nil {
		return err
	}
	a, err := New(cfg)
	if err != nil {
		// New contacts nothing (kas and upstreams are dialled when used): what it refuses is the
		// configuration.
		return cli.UsageError{Err: err}
	}
	if err := a.Start(); err != nil {
		// What New opened (the connection to kas, metrics, upstreams) closes with it.
		sctx, cancel := context.WithTimeout(context.Background(), StopGrace)
		defer cancel()
		a.Stop(sctx)
		return err
	}
	<-ctx.Done()
	cfg.Log.Info("stopping: calls in flight may finish", "grace", StopGrace)
	sctx, cancel := context.WithTimeout(context.Background(), StopGrace)
	defer cancel()
	a.Stop(sctx)
	return nil
}
