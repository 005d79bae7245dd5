package load

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tunnelbench/tunnelbench/core/demo"
)

// demoConn serves the demo service in this process and returns a connection to it; both close with
// the test.
func demoConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	demo.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:demo",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestParseShape(t *testing.T) {
	for _, s := range []Shape{ShapeUnary, ShapeServerStream, ShapeClientStream, ShapeBidi, ShapeSleep} {
		if got, err := ParseShape(string(s)); err != nil || got != s {
			t.Errorf("%s: %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "Unary", "stream", "unary-64B"} {
		if _, err := ParseShape(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

// TestShapeCalls: every shape's call succeeds against the demo service, moves the bytes its shape
// says, and goes through meta.
func TestShapeCalls(t *testing.T) {
	conn := demoConn(t)
	const payload = 100
	for shape, want := range map[Shape]int{
		ShapeUnary:        2 * payload,
		ShapeServerStream: StreamMessages * payload,
		ShapeClientStream: StreamMessages * payload,
		ShapeBidi:         2 * payload,
		ShapeSleep:        0,
	} {
		t.Run(string(shape), func(t *testing.T) {
			decorated := 0
			meta := func(ctx context.Context) context.Context {
				decorated++
				return metadata.AppendToOutgoingContext(ctx, "shape", string(shape))
			}
			call := NewShapeCall(shape, payload, conn, meta)()
			for range 2 { // twice: a bidi call reuses its stream
				n, err := call(testContext(t, 30*time.Second))
				if err != nil || n != want {
					t.Fatalf("%d bytes, %v; want %d bytes", n, err, want)
				}
			}
			if decorated == 0 {
				t.Error("meta was not used")
			}
		})
	}
}
