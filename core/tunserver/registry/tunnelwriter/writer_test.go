package tunnelwriter

import (
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/mem"

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

func (s *sendLog) SendMsg(m any) error { return s.Send(asResponse(m)) }

// asResponse is what a message sent with SendMsg is on the wire.
func asResponse(m any) *rpc.ConnectResponse {
	switch x := m.(type) {
	case *rpc.SharedResponseMessage:
		return &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: x.Buf.ReadOnlyData()}}}
	case *rpc.SharedResponseBatch:
		return batch(x.Msgs)
	}
	return m.(*rpc.ConnectResponse)
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
	w.flushHeld() // as the timer would, had it fired just now
	if got := log.states(); len(got) != 0 {
		t.Fatalf("sent %v after close, want nothing", got)
	}
}

// batchLog records what kas sends, a batch as the list of what it holds.
type batchLog struct {
	mu   sync.Mutex
	sent [][]rpc.State
}

func (s *batchLog) Send(m *rpc.ConnectResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var states []rpc.State
	if b := m.GetBatch(); b != nil {
		for _, x := range b.GetMsgs() {
			states = append(states, rpc.KasState(x))
		}
	} else {
		states = []rpc.State{rpc.KasState(m)}
	}
	s.sent = append(s.sent, states)
	return nil
}

func (s *batchLog) SendMsg(m any) error { return s.Send(asResponse(m)) }

func (s *batchLog) messages() [][]rpc.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

var (
	testInfo    = &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{MethodName: "/s/m"}}}
	testMessage = func(n int) *rpc.ConnectResponse {
		return &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: make([]byte, n)}}}
	}
	testCloseSend = &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CloseSend{CloseSend: &rpc.CloseSend{}}}
)

// On a batched tunnel a held call_end, the next call's held request_info and message and its close_send
// leave as one message, in order.
func TestBatchedTunnelSendsHeldMessagesAsOne(t *testing.T) {
	log := &batchLog{}
	w := &Writer{Stream: log, Batches: true}
	w.HoldCallEnd()
	w.Hold(testInfo)
	w.Hold(testMessage(64))
	if err := w.Send(testCloseSend); err != nil {
		t.Fatal(err)
	}
	w.Close()
	want := [][]rpc.State{{rpc.StateCallEnd, rpc.StateRequestInfo, rpc.StateMessage, rpc.StateCloseSend}}
	if got := log.messages(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// Without batches held messages go first, one by one; a payload too large to batch goes alone after
// the held batch.
func TestHeldMessagesWithoutBatchesOrTooLarge(t *testing.T) {
	log := &batchLog{}
	w := &Writer{Stream: log}
	w.HoldCallEnd()
	w.Hold(testInfo)
	if err := w.Send(testCloseSend); err != nil {
		t.Fatal(err)
	}
	big := &batchLog{}
	wb := &Writer{Stream: big, Batches: true}
	wb.HoldCallEnd()
	wb.Hold(testInfo)
	if err := wb.Send(testMessage(rpc.BatchMaxBytes + 1)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	wb.Close()
	if got, want := log.messages(), [][]rpc.State{{rpc.StateCallEnd}, {rpc.StateRequestInfo}, {rpc.StateCloseSend}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("without batches: sent %v, want %v", got, want)
	}
	if got, want := big.messages(), [][]rpc.State{{rpc.StateCallEnd, rpc.StateRequestInfo}, {rpc.StateMessage}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("large message: sent %v, want %v", got, want)
	}
}

// A held request_info whose call sends nothing more leaves within CallEndDelay (waited for up to
// waitBound), as one batch with a held call_end.
func TestHeldRequestInfoFlushesAlone(t *testing.T) {
	log := &batchLog{}
	w := &Writer{Stream: log, Batches: true}
	w.HoldCallEnd()
	w.Hold(testInfo)
	deadline := time.Now().Add(waitBound)
	for len(log.messages()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing sent within %s", waitBound)
		}
		time.Sleep(time.Millisecond)
	}
	w.Close()
	if got, want := log.messages(), [][]rpc.State{{rpc.StateCallEnd, rpc.StateRequestInfo}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// A message whose data others hold references to goes alone, after what is held (on a batched tunnel
// too), and never once the tunnel is closed.
func TestSendSharedGoesAloneAfterHeld(t *testing.T) {
	log := &batchLog{}
	w := &Writer{Stream: log, Batches: true}
	w.HoldCallEnd()
	w.Hold(testInfo)
	shared := &rpc.SharedResponseMessage{Buf: mem.SliceBuffer(make([]byte, 64))}
	if err := w.SendShared(shared); err != nil {
		t.Fatal(err)
	}
	if err := w.Send(testCloseSend); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := w.SendShared(shared); err != ErrClosed {
		t.Errorf("SendShared after close: %v, want ErrClosed", err)
	}
	want := [][]rpc.State{{rpc.StateCallEnd, rpc.StateRequestInfo}, {rpc.StateMessage}, {rpc.StateCloseSend}}
	if got := log.messages(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("sent %v, want %v", got, want)
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

func (s blockedStream) SendMsg(m any) error { return s.Send(asResponse(m)) }

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

// End sends what is held and then its message, on a batched tunnel as one batch, and nothing after it:
// a later Send fails and a later Hold is dropped.
func TestEndIsTheLastMessage(t *testing.T) {
	for _, batches := range []bool{false, true} {
		log := &sendLog{}
		w := &Writer{Stream: log, Batches: batches}
		w.HoldCallEnd()
		w.End(rpc.EndTunnelMessage(rpc.EndReasonMaxAge, nil))
		deadline := time.Now().Add(waitBound)
		for len(log.states()) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := w.Send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{}}}); err != ErrClosed {
			t.Fatalf("Send after End: %v, want ErrClosed", err)
		}
		w.HoldCallEnd()
		w.End(rpc.EndTunnelMessage(rpc.EndReasonShutdown, nil))
		time.Sleep(2 * CallEndDelay)
		w.Close()
		want := []rpc.State{rpc.StateCallEnd, rpc.StateEndTunnel}
		if batches {
			want = []rpc.State{rpc.StateBatch}
		}
		if got := log.states(); !slices.Equal(got, want) {
			t.Fatalf("batches %v: sent %v, want %v", batches, got, want)
		}
	}
}
