package tunclient

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient/reconnect"
)

// fakeKas ends every tunnel after its descriptor with end, and the trailer reason.
type fakeKas struct {
	rpc.UnimplementedReverseTunnelServer
	end     error
	reason  string
	tunnels atomic.Int64
}

func (f *fakeKas) Connect(stream rpc.ReverseTunnel_ConnectServer) error {
	var first grpctool.RawFrame
	if err := stream.RecvMsg(&first); err != nil {
		return err
	}
	f.tunnels.Add(1)
	if f.reason != "" {
		stream.SetTrailer(metadata.Pairs(rpc.TunnelEndReasonKey, f.reason))
	}
	return f.end
}

// startFakeKas serves f on an in-memory listener and returns an agent connected to it whose backoff
// lasts an hour: a tunnel that backs off never comes back within a test.
func startFakeKas(t *testing.T, f *fakeKas) *Agent {
	return startAgentOn(t, f, Config{MinIdle: 1, Backoff: reconnect.Backoff{Initial: time.Hour, Max: time.Hour, Factor: 1, Jitter: 0}})
}

// startAgentOn serves kas on an in-memory listener and starts an agent with cfg (KasConn set here)
// connected to it; both stop when the test ends.
func startAgentOn(t *testing.T, kas rpc.ReverseTunnelServer, cfg Config, register ...func(*Agent)) *Agent {
	t.Helper()
	l := grpctool.NewInMemoryListener()
	srv := grpc.NewServer(grpctool.RawServerCodec())
	rpc.RegisterReverseTunnelServer(srv, kas)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := DialKas("passthrough:in-memory", "token", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	cfg.KasConn = conn
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range register {
		r(a)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Stop(ctx)
	})
	return a
}

// A tunnel that kas ended over its call, whatever the status, says nothing about the agent's connection:
// the agent opens the next one at once, without backoff.
func TestCallEndedReasonReconnectsWithoutBackoff(t *testing.T) {
	f := &fakeKas{end: status.Error(codes.ResourceExhausted, "the call's request info is too large"), reason: rpc.EndReasonCallEnded}
	startFakeKas(t, f)
	deadline := time.Now().Add(10 * time.Second)
	for f.tunnels.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d tunnels in 10 s: the agent backed off", f.tunnels.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The same status without the reason is a connect error: the agent backs off.
func TestErrorWithoutReasonBacksOff(t *testing.T) {
	f := &fakeKas{end: status.Error(codes.ResourceExhausted, "too many tunnels")}
	a := startFakeKas(t, f)
	deadline := time.Now().Add(10 * time.Second)
	for a.metrics == nil || f.tunnels.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no tunnel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // long enough for several reconnects if it did not back off
	if n := f.tunnels.Load(); n != 1 {
		t.Fatalf("%d tunnels: the agent did not back off", n)
	}
}
