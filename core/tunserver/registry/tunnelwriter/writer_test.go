package tunnelwriter

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// waitBound bounds every wait of a test.
const waitBound = 10 * time.Second

// sendLog is a Connect stream as kas writes to it: it records what kas sends to the agent.
type sendLog struct {
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

// A held call_end goes out first with the tunnel's next message, never after it: the agent must see
// the end of the last call before the next call's request_info.
func TestHeldCallEndGoesBeforeTheNextMessage(t *testing.T) {
	log := &sendLog{}
	w := &Writer{Stream: log}
	w.HoldCallEnd()
	if err := w.Send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{}}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got, want := log.states(), []rpc.State{rpc.StateCallEnd, rpc.StateRequestInfo}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// With no next call, a held call_end goes out alone, once, within CallEndDelay (waited for up to
// waitBound): the agent's tunnel becomes idle for it.
func TestHeldCallEndFlushesAlone(t *testing.T) {
	log := &sendLog{}
	w := &Writer{Stream: log}
	w.HoldCallEnd()
	deadline := time.Now().Add(waitBound)
	for len(log.states()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no call_end within %s", waitBound)
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.Send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{}}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got, want := log.states(), []rpc.State{rpc.StateCallEnd, rpc.StateRequestInfo}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// Once the Connect handler is ending, a held call_end is not sent (the stream ends without it).
func TestHeldCallEndDroppedAtClose(t *testing.T) {
	log := &sendLog{}
	w := &Writer{Stream: log}
	w.HoldCallEnd()
	w.Close()
	w.flushCallEnd() // as the timer would, had it fired just now
	if got := log.states(); len(got) != 0 {
		t.Fatalf("sent %v after close, want nothing", got)
	}
}

func TestSendAfterCloseFails(t *testing.T) {
	log := &sendLog{}
	w := &Writer{Stream: log}
	w.Close()
	if err := w.Send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{}}}); err != ErrClosed {
		t.Fatalf("send after close: %v, want ErrClosed", err)
	}
	if got := log.states(); len(got) != 0 {
		t.Fatalf("sent %v after close, want nothing", got)
	}
}

// blockedStream is an agent that stopped reading: Send signals entered and waits until release is
// closed.
type blockedStream struct{ entered, release chan struct{} }

func (s blockedStream) Send(*rpc.ConnectResponse) error {
	close(s.entered)
	<-s.release
	return nil
}

// Close must not wait for a send that flow control holds: only the Connect handler's return ends it.
// (It waits closeWait, one second, first.)
func TestCloseDoesNotWaitForAHeldSend(t *testing.T) {
	s := blockedStream{entered: make(chan struct{}), release: make(chan struct{})}
	w := &Writer{Stream: s}
	sent := make(chan error, 1)
	go func() { sent <- w.Send(&rpc.ConnectResponse{}) }()
	<-s.entered
	closed := make(chan struct{})
	go func() {
		w.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitBound):
		t.Fatalf("Close still waits for the held send after %s", waitBound)
	}
	select {
	case err := <-sent:
		t.Fatalf("the send ended (%v) before the stream let it", err)
	default:
	}
	close(s.release)
	if err := <-sent; err != nil {
		t.Fatalf("the send in progress: %v", err)
	}
}
