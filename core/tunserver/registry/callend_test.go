package registry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
)

// sendLog is a Connect stream as kas writes to it: it records what kas sends to the agent. Nothing in
// these tests reads from it (no reader runs).
type sendLog struct {
	rpc.ReverseTunnel_ConnectServer
	mu   sync.Mutex
	sent []rpc.State
}

func (s *sendLog) Send(m *rpc.ConnectResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, rpc.KasState(m))
	return nil
}

func (s *sendLog) states() []rpc.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rpc.State(nil), s.sent...)
}

// A caller that went away just as its call took a reusable tunnel: whichever of its end and the attach
// of its request comes first, the agent never gets a call_end without the call's request_info before it
// (an agent with no call takes that for a broken protocol and drops the tunnel), and the tunnel is idle
// again. Run many times: the two race.
func TestCallerGoneBeforeTheCallReachedTheTunnel(t *testing.T) {
	for i := range 300 {
		r := New(nil, 4)
		log := &sendLog{}
		tun := newTunnel(r, 1, desc(t), log)
		tun.reuse, tun.drain = true, time.Millisecond
		if err := r.Reserve(1); err != nil {
			t.Fatal(err)
		}
		if err := r.addTunnel(tun); err != nil {
			t.Fatal(err)
		}
		_, h := r.FindTunnel(1, testService, "M")
		fw, err := h.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		pump := request.Start(silentCaller{ctx: ctx}, &rpc.RequestInfo{MethodName: "/" + testService + "/M"}, request.DefaultReplayLimit)
		if err := fw.Forward(ctx, pump, func(*rpc.ConnectRequest, *[]byte, bool) error { return nil }); !errors.Is(err, context.Canceled) {
			t.Fatalf("run %d: Forward: %v, want the caller's end", i, err)
		}
		h.Done()
		// Either nothing reached the agent and the tunnel is idle at once, or the call went out whole
		// and ends by the book (here by the drain timeout, as no agent answers).
		deadline := time.Now().Add(waitBound)
		for {
			tun.mu.Lock()
			st := tun.state
			tun.mu.Unlock()
			if st == TunnelIdle || st == TunnelDone {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d: tunnel stuck %v", i, st)
			}
			time.Sleep(time.Millisecond)
		}
		sent := log.states()
		if len(sent) > 0 && sent[0] != rpc.StateRequestInfo {
			t.Fatalf("run %d: kas sent %v to an agent with no call", i, sent)
		}
		if len(sent) == 0 && tun.state != TunnelIdle {
			t.Fatalf("run %d: nothing was sent, yet the tunnel is %v, not idle", i, tun.state)
		}
		r.finish(tun, nil, "")
	}
}

// The same race, one order forced: kas ends the call (the caller's end) before Forward attaches the
// request. Nothing may go to the agent, then or later, and the tunnel is idle again.
func TestCallEndedBeforeAttachSendsNothing(t *testing.T) {
	r := New(nil, 4)
	log := &sendLog{}
	tun := newTunnel(r, 1, desc(t), log)
	tun.reuse, tun.drain = true, time.Hour
	if err := r.Reserve(1); err != nil {
		t.Fatal(err)
	}
	if err := r.addTunnel(tun); err != nil {
		t.Fatal(err)
	}
	_, h := r.FindTunnel(1, testService, "M")
	if _, err := h.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pump := request.Start(silentCaller{ctx: ctx}, &rpc.RequestInfo{MethodName: "/" + testService + "/M"}, request.DefaultReplayLimit)
	fwd := newForwarding(pump, func(*rpc.ConnectRequest, *[]byte, bool) error { return nil }, true)
	if err := tun.startForwarding(r, fwd); err != nil {
		t.Fatal(err)
	}
	tun.endCall(fwd, errCallerCancelled)
	if err := pump.Attach(&tunnelTarget{t: tun, info: pump.RequestInfo()}); !errors.Is(err, request.ErrCallOver) {
		t.Fatalf("attach after the call ended: %v, want ErrCallOver", err)
	}
	if sent := log.states(); len(sent) != 0 {
		t.Fatalf("kas sent %v to an agent that never got the call", sent)
	}
	wantState(t, tun, TunnelIdle)
	h.Done()
	r.finish(tun, nil, "")
}
