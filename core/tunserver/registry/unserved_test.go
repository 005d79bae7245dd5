package registry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
)

func wantPresence(t *testing.T, r *Registry, method string, want presence.Presence) {
	t.Helper()
	if got := r.Presence(1, testService, method); got != want {
		t.Fatalf("presence for %s: %s, want %s", method, got, want)
	}
}

func TestPresenceFollowsTunnels(t *testing.T) {
	r := New(nil, 4)
	wantPresence(t, r, "A", presence.AgentAbsent)
	if err := r.Reserve(1); err != nil {
		t.Fatal(err)
	}
	wantPresence(t, r, "A", presence.AgentAbsent) // a tunnel in its handshake announced nothing yet
	r.CancelReservation(1)

	a1 := newIdle(t, r, "A")
	a2 := newTunnel(r, 1, a1.desc, nil) // the same descriptor, as agentapi's cache hands it out
	if err := r.Reserve(1); err != nil {
		t.Fatal(err)
	}
	if err := r.addTunnel(a2); err != nil {
		t.Fatal(err)
	}
	wantPresence(t, r, "A", presence.MethodServed)
	wantPresence(t, r, "B", presence.MethodUnserved)
	b := newIdle(t, r, "B")
	wantPresence(t, r, "B", presence.MethodServed)
	if n := r.stripe(1).agents[1].descs.Len(); n != 2 {
		t.Fatalf("%d descriptors kept for two distinct ones", n)
	}

	// A busy tunnel still serves its methods.
	found, h := r.FindTunnel(1, testService, "B")
	if !found {
		t.Fatal("idle tunnel for B not found")
	}
	wantPresence(t, r, "B", presence.MethodServed)
	h.Done()

	r.finish(b, nil, "")
	wantPresence(t, r, "B", presence.MethodUnserved)
	r.finish(a1, nil, "")
	wantPresence(t, r, "A", presence.MethodServed)
	r.finish(a2, nil, "")
	wantPresence(t, r, "A", presence.AgentAbsent)
}

// getServed runs GetServed for method of agent 1 the way the finder does.
func getServed(ctx context.Context, r *Registry, method string, grace time.Duration) (Forwarder, error) {
	_, h := r.FindTunnel(1, testService, method)
	defer h.Done()
	c := presence.Call{AgentID: 1, Service: testService, Method: method}
	return presence.GetServed(ctx, h, r, c, grace, presence.UnservedError(1, "/"+testService+"/"+method, grace))
}

func TestGetServedUnservedFailsAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(nil, 4)
		newIdle(t, r, "A")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // the find timeout
		defer cancel()
		start := time.Now()
		_, err := getServed(ctx, r, "B", time.Second)
		st := status.Convert(err)
		if st.Code() != codes.Unimplemented || st.Message() != "agent 1 is connected but does not serve /test.Svc/B: none of its tunnels announced it within 1s (--unserved-grace)" {
			t.Fatalf("unserved method: %v", err)
		}
		if d := time.Since(start); d < time.Second || d >= 30*time.Second {
			t.Fatalf("failed after %s (fake time), want the grace of 1s", d)
		}
		wantStats(t, r, Stats{IdleTunnels: 1, ConnectedAgents: 1}) // the call left the line
	})
}

func TestGetServedAgentUpgradedWithinGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(nil, 4)
		old := newIdle(t, r, "A")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		type result struct {
			f   Forwarder
			err error
		}
		got := make(chan result, 1)
		go func() {
			f, err := getServed(ctx, r, "B", time.Second)
			got <- result{f, err}
		}()
		time.Sleep(900 * time.Millisecond)
		// The new version connects, the old one leaves.
		upgraded := newIdle(t, r, "A", "B")
		r.finish(old, nil, "")
		res := <-got
		if res.err != nil || res.f != upgraded {
			t.Fatalf("call during the upgrade: %v %v", res.f, res.err)
		}
	})
}

func TestGetServedAbsentAgentWaitsWholeFind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(nil, 4)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, err := getServed(ctx, r, "B", time.Second)
		if err != context.DeadlineExceeded || time.Since(start) != 30*time.Second {
			t.Fatalf("absent agent: %v after %s", err, time.Since(start))
		}
	})
}

func TestGetServedJudgesAgentThatConnectsLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(nil, 4)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		go func() {
			time.Sleep(5500 * time.Millisecond)
			newIdle(t, r, "A")
		}()
		start := time.Now()
		_, err := getServed(ctx, r, "B", time.Second)
		// Checks at 0..5 s see nothing, at 6 s a new agent without B (which gets its grace), at 7 s still.
		if status.Code(err) != codes.Unimplemented || time.Since(start) != 7*time.Second {
			t.Fatalf("agent connecting without the method: %v after %s", err, time.Since(start))
		}
	})
}

func TestGetServedWithoutGraceWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(nil, 4)
		newIdle(t, r, "A")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := getServed(ctx, r, "B", 0); err != context.DeadlineExceeded {
			t.Fatalf("grace 0: %v", err)
		}
	})
}
