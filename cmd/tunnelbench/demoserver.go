package main

import (
	"context"
	"flag"
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
	fs := flag.NewFlagSet("tunnelbench demo-server", flag.ContinueOnError)
	cli.SetUsage(fs, `
tunnelbench demo-server serves the demo service (tunnelbench.demo.v1.Demo), gRPC health and server
reflection on a plain gRPC listener, for example as an upstream for agentk --expose.

Usage: tunnelbench demo-server [--listen ADDR]`)
	addr := fs.String("listen", "127.0.0.1:9000", "address to listen on")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	l, err := cli.Listen("listen", *addr)
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
