package registry

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
)

const testService = "test.Svc"

func desc(t *testing.T, methods ...string) descriptor.Index {
	t.Helper()
	s := &rpc.Service{Name: testService}
	for _, m := range methods {
		s.Methods = append(s.Methods, &rpc.Method{Name: m})
	}
	if len(methods) == 0 {
		s.AllMethods = true
	}
	d, err := descriptor.NewIndex(&rpc.AgentDescriptor{Services: []*rpc.Service{s}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// newIdle adds a tunnel of agent 1 that serves methods (all when none) to r.
func newIdle(t *testing.T, r *Registry, methods ...string) *Tunnel {
	t.Helper()
	tun := newTunnel(r, 1, desc(t, methods...), nil)
	if err := r.Reserve(1); err != nil {
		t.Fatal(err)
	}
	if err := r.addTunnel(tun); err != nil {
		t.Fatal(err)
	}
	return tun
}

func wantState(t *testing.T, tun *Tunnel, want TunnelState) {
	t.Helper()
	if got := tun.State(); got != want {
		t.Fatalf("tunnel is %s, want %s", got, want)
	}
}

func wantStats(t *testing.T, r *Registry, want Stats) {
	t.Helper()
	if got := r.Stats(); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
}

func TestTransitionIdleToFound(t *testing.T) {
	r := New(nil, 4)
	tun := newIdle(t, r)
	wantStats(t, r, Stats{IdleTunnels: 1, ConnectedAgents: 1})
	found, h := r.FindTunnel(1, testService, "M")
	if !found {
		t.Fatal("idle tunnel not found at once")
	}
	got, err := h.Get(context.Background())
	if err != nil || got != tun {
		t.Fatalf("Get: %v %v", got, err)
	}
	wantState(t, tun, TunnelFound)
	wantStats(t, r, Stats{BusyTunnels: 1, ConnectedAgents: 1})
	h.Done()
}

func TestTransitionFoundToIdleWhenUnused(t *testing.T) {
	r := New(nil, 4)
	tun := newIdle(t, r)
	_, h := r.FindTunnel(1, testService, "M")
	if _, err := h.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.Done()
	wantState(t, tun, TunnelIdle)
	wantStats(t, r, Stats{IdleTunnels: 1, ConnectedAgents: 1})
	h.Done() // twice is fine
	wantStats(t, r, Stats{IdleTunnels: 1, ConnectedAgents: 1})
}

func TestTransitionFoundToForwardingToDone(t *testing.T) {
	r := New(nil, 4)
	tun := newIdle(t, r)
	_, h := r.FindTunnel(1, testService, "M")
	if _, err := h.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tun.startForwarding(r, newForwarding(nil, nil, false)); err != nil {
		t.Fatal(err)
	}
	wantState(t, tun, TunnelForwarding)
	h.Done() // a forwarding tunnel is not given back
	wantState(t, tun, TunnelForwarding)
	r.finish(tun, nil, "")
	wantState(t, tun, TunnelDone)
	wantStats(t, r, Stats{})
	select {
	case <-tun.done:
	default:
		t.Fatal("done not closed")
	}
}

func TestTransitionIdleToDone(t *testing.T) {
	cases := map[string]struct {
		event      func(r *Registry, tun *Tunnel)
		wantErr    codes.Code
		wantReason string
	}{
		"agent withdrew": {event: func(r *Registry, tun *Tunnel) { r.onReaderResult(tun, recvResult{err: io.EOF}) }},
		"agent went away": {
			event: func(r *Registry, tun *Tunnel) {
				r.onReaderResult(tun, recvResult{err: status.Error(codes.Canceled, "gone")})
			},
			wantErr: codes.Canceled,
		},
		"agent spoke out of turn": {
			event: func(r *Registry, tun *Tunnel) {
				r.onReaderResult(tun, recvResult{msg: &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Trailer{Trailer: &rpc.Trailer{}}}})
			},
			wantErr: codes.InvalidArgument,
		},
		"max age":  {event: func(r *Registry, tun *Tunnel) { r.expire(tun, rpc.EndReasonMaxAge) }, wantReason: rpc.EndReasonMaxAge},
		"shutdown": {event: func(r *Registry, _ *Tunnel) { r.Stop() }, wantReason: rpc.EndReasonShutdown},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := New(nil, 4)
			tun := newIdle(t, r)
			c.event(r, tun)
			wantState(t, tun, TunnelDone)
			wantStats(t, r, Stats{})
			if status.Code(tun.endErr) != c.wantErr {
				t.Fatalf("end error %v, want %v", tun.endErr, c.wantErr)
			}
			if tun.endReason != c.wantReason {
				t.Fatalf("end reason %q, want %q", tun.endReason, c.wantReason)
			}
		})
	}
}

func TestTransitionFoundToDone(t *testing.T) {
	cases := map[string]func(r *Registry, tun *Tunnel){
		"withdrawn while found": func(r *Registry, tun *Tunnel) { r.onReaderResult(tun, recvResult{err: io.EOF}) },
		"expired while found":   func(r *Registry, tun *Tunnel) { r.expire(tun, rpc.EndReasonMaxAge) },
		"kas stopped":           func(r *Registry, _ *Tunnel) { r.Stop() },
	}
	for name, event := range cases {
		t.Run(name+", given back", func(t *testing.T) {
			r := New(nil, 4)
			tun := newIdle(t, r)
			_, h := r.FindTunnel(1, testService, "M")
			_, _ = h.Get(context.Background())
			event(r, tun)
			wantState(t, tun, TunnelFound)
			h.Done()
			wantState(t, tun, TunnelDone)
			wantStats(t, r, Stats{})
		})
	}
	t.Run("withdrawn while found, then used", func(t *testing.T) {
		r := New(nil, 4)
		tun := newIdle(t, r)
		_, h := r.FindTunnel(1, testService, "M")
		_, _ = h.Get(context.Background())
		r.onReaderResult(tun, recvResult{err: io.EOF})
		if err := tun.startForwarding(r, newForwarding(nil, nil, false)); !errors.Is(err, ErrRetryOtherTunnel) {
			t.Fatalf("startForwarding on a withdrawn tunnel: %v", err)
		}
		wantState(t, tun, TunnelDone)
		h.Done()
		wantStats(t, r, Stats{})
	})
}

func TestImpossibleTransitionsAreErrors(t *testing.T) {
	all := []TunnelState{TunnelIdle, TunnelFound, TunnelForwarding, TunnelDone}
	allowed := 0
	for _, from := range all {
		for _, to := range all {
			tun := &Tunnel{state: from, done: make(chan struct{})}
			err := tun.moveLocked(to)
			if transitionAllowed(from, to) {
				allowed++
				if err != nil {
					t.Errorf("%s -> %s: %v", from, to, err)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s -> %s allowed", from, to)
			}
			if tun.state != from {
				t.Errorf("%s -> %s changed the state", from, to)
			}
		}
	}
	if allowed != 7 {
		t.Fatalf("%d transitions allowed, the table has 7", allowed)
	}
}

func TestWaitingCallGetsNewTunnel(t *testing.T) {
	r := New(nil, 4)
	found, h := r.FindTunnel(1, testService, "M")
	if found {
		t.Fatal("found a tunnel in an empty registry")
	}
	wantStats(t, r, Stats{WaitingCalls: 1})
	tun := newIdle(t, r)
	got, err := h.Get(context.Background())
	if err != nil || got != tun {
		t.Fatalf("Get: %v %v", got, err)
	}
	wantState(t, tun, TunnelFound)
	wantStats(t, r, Stats{BusyTunnels: 1, ConnectedAgents: 1})
	h.Done()
	wantStats(t, r, Stats{IdleTunnels: 1, ConnectedAgents: 1})
}

func TestWaitingCallsFirstInFirstOutByMethod(t *testing.T) {
	r := New(nil, 4)
	_, a1 := r.FindTunnel(1, testService, "A")
	_, b := r.FindTunnel(1, testService, "B")
	_, a2 := r.FindTunnel(1, testService, "A")
	// A tunnel that only serves B skips the older A call.
	tb := newIdle(t, r, "B")
	if got, _ := b.Get(context.Background()); got != tb {
		t.Fatal("B call did not get the B tunnel")
	}
	// A tunnel that serves everything goes to the oldest remaining call.
	tAll := newIdle(t, r)
	if got, _ := a1.Get(context.Background()); got != tAll {
		t.Fatal("the oldest A call did not get the tunnel")
	}
	wantStats(t, r, Stats{BusyTunnels: 2, WaitingCalls: 1, ConnectedAgents: 1})
	// Given back, the tunnel serves the next waiting call at once.
	a1.Done()
	if got, _ := a2.Get(context.Background()); got != tAll {
		t.Fatal("the second A call did not get the given-back tunnel")
	}
	for _, h := range []Handle{b, a2} {
		h.Done()
	}
	wantStats(t, r, Stats{IdleTunnels: 2, ConnectedAgents: 1})
}

func TestTunnelNotServingMethodIsNotFound(t *testing.T) {
	r := New(nil, 4)
	newIdle(t, r, "A")
	found, h := r.FindTunnel(1, testService, "B")
	if found {
		t.Fatal("found a tunnel that does not serve B")
	}
	if found, _ := r.FindTunnel(1, "other.Svc", "A"); found {
		t.Fatal("found a tunnel for another service")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.Get(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get: %v", err)
	}
	h.Done()
}

// TestRaceTunnelArrivesAsCallGivesUp: a tunnel delivered at the very moment the waiting call's context
// ends must go back to the registry, never be lost or counted twice.
func TestRaceTunnelArrivesAsCallGivesUp(t *testing.T) {
	for i := range 2000 {
		r := New(nil, 4)
		_, h := r.FindTunnel(1, testService, "M")
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		tun := newTunnel(r, 1, desc(t), nil)
		wg.Add(2)
		go func() {
			defer wg.Done()
			if r.Reserve(1) == nil {
				_ = r.addTunnel(tun)
			}
		}()
		go func() {
			defer wg.Done()
			cancel()
		}()
		got, err := h.Get(ctx)
		wg.Wait()
		h.Done()
		if err == nil && got != tun {
			t.Fatalf("iteration %d: got a different tunnel", i)
		}
		if tun.State() != TunnelIdle {
			t.Fatalf("iteration %d: tunnel is %s after the call gave up, want idle", i, tun.State())
		}
		wantStats(t, r, Stats{IdleTunnels: 1, ConnectedAgents: 1})
		cancel()
	}
}

// TestRaceWithdrawAsCallTakesTunnel: the agent withdraws the tunnel while a call takes it; the call must
// either fail over (ErrRetryOtherTunnel) or own a live tunnel, and the registry must end up empty.
func TestRaceWithdrawAsCallTakesTunnel(t *testing.T) {
	for i := range 2000 {
		r := New(nil, 4)
		tun := newIdle(t, r)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.onReaderResult(tun, recvResult{err: io.EOF})
		}()
		found, h := r.FindTunnel(1, testService, "M")
		wg.Wait()
		if found {
			f, _ := h.Get(context.Background())
			got := f.(*Tunnel)
			if err := got.startForwarding(r, newForwarding(nil, nil, false)); err == nil {
				// The reader saw forwarding first: the call owns the tunnel, the EOF is the call's.
				r.finish(got, nil, "")
			} else if !errors.Is(err, ErrRetryOtherTunnel) {
				t.Fatalf("iteration %d: %v", i, err)
			}
		}
		h.Done()
		wantState(t, tun, TunnelDone)
		wantStats(t, r, Stats{})
	}
}

func TestStopFailsWaitingCallsAndRefusesNewOnes(t *testing.T) {
	r := New(nil, 4)
	_, h := r.FindTunnel(1, testService, "M")
	r.Stop()
	if _, err := h.Get(context.Background()); status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "kas is shutting down" {
		t.Fatalf("waiting call after stop: %v", err)
	}
	h.Done()
	_, h2 := r.FindTunnel(1, testService, "M")
	if _, err := h2.Get(context.Background()); status.Code(err) != codes.Unavailable {
		t.Fatalf("new call after stop: %v", err)
	}
	h2.Done()
	if err := r.Reserve(1); status.Code(err) != codes.Unavailable {
		t.Fatalf("new tunnel after stop: %v", err)
	}
	wantStats(t, r, Stats{})
}

func TestWaitingIsBoundedAcrossAgents(t *testing.T) {
	r := New(nil, 0)
	var hits []string
	r.SetLimits(Limits{MaxWaiting: 3}, func(l string) { hits = append(hits, l) })
	var handles []Handle
	for id := range int64(3) {
		_, h := r.FindTunnel(id+10, testService, "M")
		handles = append(handles, h)
	}
	_, h := r.FindTunnel(99, testService, "M")
	if _, err := h.Get(context.Background()); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-waiting-calls") {
		t.Fatalf("fourth waiting call: %v", err)
	}
	h.Done()
	if len(hits) != 1 || hits[0] != tunserver.LimitWaiting {
		t.Fatalf("limit hits %v", hits)
	}
	wantStats(t, r, Stats{WaitingCalls: 3})
	handles[0].Done()
	_, h = r.FindTunnel(99, testService, "M") // a place is free again
	if h.(*FindHandle).err != nil {
		t.Fatalf("after one left: %v", h.(*FindHandle).err)
	}
	h.Done()
	for _, h := range handles[1:] {
		h.Done()
	}
	wantStats(t, r, Stats{})
}

func TestPendingTunnelsCountAgainstTheLimit(t *testing.T) {
	r := New(nil, 0)
	r.SetLimits(Limits{MaxTunnelsPerAgent: 2}, nil)
	for range 2 {
		if err := r.Reserve(1); err != nil {
			t.Fatal(err)
		}
	}
	wantStats(t, r, Stats{PendingTunnels: 2})
	if err := r.Reserve(1); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "still in their handshake") {
		t.Fatalf("third: %v", err)
	}
	if err := r.Reserve(2); err != nil { // another agent is not affected
		t.Fatal(err)
	}
	r.CancelReservation(2)
	if err := r.addTunnel(newTunnel(r, 1, desc(t), nil)); err != nil {
		t.Fatal(err)
	}
	r.CancelReservation(1)
	wantStats(t, r, Stats{IdleTunnels: 1, ConnectedAgents: 1})
	if err := r.Reserve(1); err != nil {
		t.Fatalf("after a handshake failed: %v", err)
	}
	r.CancelReservation(1)
}
