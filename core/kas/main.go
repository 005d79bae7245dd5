package kas

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tracing"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// Main runs a kas from its command line until ctx ends (SIGINT or SIGTERM in cmd/kas), then shuts it
// down gracefully. It is cmd/kas, as a function, so that other binaries (the harness) can run a kas
// process too.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := ParseArgs(args, stdout, stderr)
	if err != nil {
		return err
	}
	tp, shutdownTracing, err := tracing.Provider(ctx, cfg.OTLPEndpoint, "kas")
	if err != nil {
		return cli.UsageError{Err: fmt.Errorf("--otlp-endpoint: %w", err)}
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(fctx)
	}()
	cfg.Tracer = tp.Tracer("github.com/tunnelbench/tunnelbench/core/kas")
	s, err := New(cfg)
	if err != nil {
		// New contacts nothing (Redis is dialled when used): what it refuses is the configuration.
		return cli.UsageError{Err: err}
	}
	if err := s.Start(); err != nil {
		// What New built (metrics, the tracker's connections) ends with it.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(sctx)
		return err
	}
	<-ctx.Done()
	cfg.Log.Info("shutting down", "grace", cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace+5*time.Second)
	defer cancel()
	s.Shutdown(sctx)
	return nil
}
