package bench

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// proxyUnary is the least a gRPC proxy does for a unary call: take the request as bytes, call the
// backend with them, pass the answer, its header and trailer back. No tunnel, routing, limits or
// metrics: what one more gRPC hop costs by itself (BenchmarkUnaryProxy).
func proxyUnary(backend grpc.ClientConnInterface) grpc.StreamHandler {
	return func(_ any, ss grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(ss)
		md, _ := metadata.FromIncomingContext(ss.Context())
		ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), md))
		defer cancel()
		var req, resp grpctool.RawFrame
		if err := ss.RecvMsg(&req); err != nil {
			return err
		}
		var header, trailer metadata.MD
		err := backend.Invoke(ctx, method, &req, &resp, grpctool.RawCallCodec(), grpc.Header(&header), grpc.Trailer(&trailer))
		ss.SetTrailer(trailer)
		if err != nil {
			return err
		}
		if err := ss.SendHeader(header); err != nil {
			return err
		}
		return ss.SendMsg(&resp)
	}
}

// BenchmarkUnaryProxy is BenchmarkUnaryDirect through a bare gRPC proxy on loopback TCP (proxyUnary):
// the same two gRPC hops as BenchmarkUnaryTunnelPublic's caller → kas → agent, without the tunnel.
// Its ratio to BenchmarkUnaryDirect in the same run is the floor that tunnel-public's ratio stands on.
func BenchmarkUnaryProxy(b *testing.B) {
	topo, err := StartTopology(context.Background(), TopologyConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Close(context.Background())
	backend, err := topo.PathConn(PathDirect)
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(grpctool.RawServerCodec(), grpc.UnknownServiceHandler(proxyUnary(backend)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	defer func() {
		srv.Stop()
		<-done
	}()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	call := load.NewShapeCall(load.ShapeUnary, 64, conn, func(ctx context.Context) context.Context { return ctx })()
	b.ReportAllocs()
	b.SetBytes(2 * 64)
	b.ResetTimer()
	for range b.N {
		if _, err := call(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
