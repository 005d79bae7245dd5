package repeats

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
)

func peerCtx(port int) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}})
}

func TestRepeatsAnswerSameClientAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var now atomic.Int32 // presence.AgentAbsent
		r := New(func(int64, string, string) presence.Presence { return presence.Presence(now.Load()) })
		c := call.Call{AgentID: 7, FullMethod: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
			Service: "grpc.reflection.v1.ServerReflection", Method: "ServerReflectionInfo"}
		client := peerCtx(5000)
		if err := r.Lookup(client, c); err != nil {
			t.Fatalf("nothing failed yet: %v", err)
		}
		r.Remember(client, c, status.Error(codes.DeadlineExceeded, "no tunnel to agent 7 within 20s"))
		time.Sleep(300 * time.Millisecond)

		err := r.Lookup(client, c)
		st := status.Convert(err)
		if st.Code() != codes.DeadlineExceeded || !strings.HasPrefix(st.Message(), "no tunnel to agent 7 within 20s (the same call from this client failed 300ms ago") {
			t.Fatalf("repeat: %v", err)
		}
		if err := r.Lookup(peerCtx(5001), c); err != nil {
			t.Fatalf("another client connection: %v", err)
		}
		if err := r.Lookup(context.Background(), c); err != nil {
			t.Fatalf("a caller without a peer (in process): %v", err)
		}
		other := c
		other.FullMethod = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
		if err := r.Lookup(client, other); err != nil {
			t.Fatalf("another method: %v", err)
		}
		now.Store(int32(presence.MethodServed))
		if err := r.Lookup(client, c); err != nil {
			t.Fatalf("the agent connected since: %v", err)
		}
		now.Store(int32(presence.AgentAbsent))
		time.Sleep(Window)
		if err := r.Lookup(client, c); err != nil {
			t.Fatalf("after the window: %v", err)
		}
	})
}

func TestRepeatsWithoutPresenceRememberNothing(t *testing.T) {
	r := New(nil)
	c := call.Call{AgentID: 7, FullMethod: "/s/m"}
	r.Remember(peerCtx(5000), c, status.Error(codes.Unimplemented, "no"))
	if err := r.Lookup(peerCtx(5000), c); err != nil {
		t.Fatal(err)
	}
}

func TestRepeatsBounded(t *testing.T) {
	r := New(func(int64, string, string) presence.Presence { return presence.AgentAbsent })
	for i := range maxRepeats + 10 {
		r.Remember(peerCtx(i), call.Call{AgentID: 1, FullMethod: "/s/m"}, status.Error(codes.Unimplemented, "no"))
	}
	if n := len(r.m); n != maxRepeats {
		t.Fatalf("%d remembered, want the bound %d", n, maxRepeats)
	}
}
