package registry

import (
	"slices"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// A held call_end goes out first with the tunnel's next message, never after it: the agent must see
// the end of the last call before the next call's request_info.
func TestHeldCallEndGoesBeforeTheNextMessage(t *testing.T) {
	log := &sendLog{}
	tun := newTunnel(New(nil, 4), 1, desc(t), log)
	tun.holdCallEnd()
	if err := tun.send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{}}}); err != nil {
		t.Fatal(err)
	}
	tun.closeSend()
	if got, want := log.states(), []rpc.State{rpc.StateCallEnd, rpc.StateRequestInfo}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// With no next call, a held call_end goes out alone, once, within CallEndDelay (waited for up to
// waitBound): the agent's tunnel becomes idle for it.
func TestHeldCallEndFlushesAlone(t *testing.T) {
	log := &sendLog{}
	tun := newTunnel(New(nil, 4), 1, desc(t), log)
	tun.holdCallEnd()
	deadline := time.Now().Add(waitBound)
	for len(log.states()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no call_end within %s", waitBound)
		}
		time.Sleep(time.Millisecond)
	}
	if err := tun.send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{}}}); err != nil {
		t.Fatal(err)
	}
	tun.closeSend()
	if got, want := log.states(), []rpc.State{rpc.StateCallEnd, rpc.StateRequestInfo}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// Once the Connect handler is ending, a held call_end is not sent (the stream ends without it).
func TestHeldCallEndDroppedAtClose(t *testing.T) {
	log := &sendLog{}
	tun := newTunnel(New(nil, 4), 1, desc(t), log)
	tun.holdCallEnd()
	tun.closeSend()
	tun.flushCallEnd() // as the timer would, had it fired just now
	if got := log.states(); len(got) != 0 {
		t.Fatalf("sent %v after close, want nothing", got)
	}
}
