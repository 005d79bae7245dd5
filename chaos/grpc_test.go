package chaos

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// startGRPC serves the gRPC health service on loopback until the test ends.
func startGRPC(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return l.Addr().String()
}

func healthClient(t *testing.T, addr string) healthpb.HealthClient {
	t.Helper()
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// A call on a connection that reset-peer resets fails with Unavailable; it works once the fault is
// removed.
func TestResetPeerGRPC(t *testing.T) {
	_, p := proxyTo(t, startGRPC(t))
	f := newFault(t, "reset-peer", nil)
	applyFault(t, f, p)
	hc := healthClient(t, p.Listen())
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("call through reset-peer: %v; want Unavailable", err)
	}
	t.Logf("call through reset-peer: %v", err)
	removeFault(t, f, p)
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("call after reset-peer was removed: %v", err)
	}
}

// A call through a link that is down fails with Unavailable, and works again once it is up.
func TestLinkDownGRPC(t *testing.T) {
	_, p := proxyTo(t, startGRPC(t))
	hc := healthClient(t, p.Listen())
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	f := newFault(t, "link-down", nil)
	applyFault(t, f, p)
	// The connection was closed under the client; once the client noticed, calls fail fast.
	deadline := time.Now().Add(waitLimit)
	for {
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if status.Code(err) == codes.Unavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls still end with %v while the link is down", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	removeFault(t, f, p)
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("call after the link came up: %v", err)
	}
}
