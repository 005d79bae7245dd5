package bench

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/tunserver"
)

// BenchmarkUnaryTunnel is for profiling one path with the Go tools:
//
//	go test ./bench -run '^$' -bench UnaryTunnel -cpuprofile cpu.out -memprofile mem.out
func BenchmarkUnaryTunnel(b *testing.B) {
	topo, err := StartTopology(context.Background(), TopologyConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Close(context.Background())
	md := metadata.Pairs(tunserver.RoutingAgentIDMetadataKey, "1")
	call := newCall(ShapeUnary, 64, topo.Tunnel(0, false), func(ctx context.Context) context.Context { return metadata.NewOutgoingContext(ctx, md) })()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := call(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnaryDirect is the direct baseline of BenchmarkUnaryTunnel: the same call, the same
// process, no tunnel.
func BenchmarkUnaryDirect(b *testing.B) {
	topo, err := StartTopology(context.Background(), TopologyConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Close(context.Background())
	conn, err := topo.PathConn(PathDirect)
	if err != nil {
		b.Fatal(err)
	}
	call := newCall(ShapeUnary, 64, conn, func(ctx context.Context) context.Context { return ctx })()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := call(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnaryTunnel1MiB is BenchmarkUnaryTunnel with 1 MiB each way.
func BenchmarkUnaryTunnel1MiB(b *testing.B) {
	topo, err := StartTopology(context.Background(), TopologyConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Close(context.Background())
	md := metadata.Pairs(tunserver.RoutingAgentIDMetadataKey, "1")
	call := newCall(ShapeUnary, 1<<20, topo.Tunnel(0, false), func(ctx context.Context) context.Context { return metadata.NewOutgoingContext(ctx, md) })()
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(2 << 20)
	b.ResetTimer()
	for range b.N {
		if _, err := call(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
