package main

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// runDemoServer serves the demo service on a plain gRPC listener: an upstream to try agentk's --expose
// with, and the server direct baselines call.
func runDemoServer(ctx context.Context, args []string, stdout io.Writer) error {
	a, err := demo.ParseServerArgs(args, stdout)
	if err != nil {
		return err
	}
	l, err := cli.Listen("listen", a.Listen)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	demo.Register(s)
	healthpb.RegisterHealthServer(s, health.NewServer())
	reflection.Register(s)
	fmt.Fprintf(stdout, "demo server on %s\n", l.Addr())
	go func() {
		<-ctx.Done()
		s.GracefulStop()
	}()
	return s.Serve(l)
}
