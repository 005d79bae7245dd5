package serverstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// recorder is the agent's end of a tunnel: it records what the stream sends, or fails every send once
// broken is set.
type recorder struct {
	mu     sync.Mutex
	sent   []*rpc.ConnectRequest
	broken bool
}

func (r *recorder) Send(m *rpc.ConnectRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken {
		return io.EOF
	}
	r.sent = append(r.sent, m)
	return nil
}

// kinds names what was sent, in order.
func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.sent {
		switch m.GetMsg().(type) {
		case *rpc.ConnectRequest_Header:
			out = append(out, "header")
		case *rpc.ConnectRequest_Message:
			out = append(out, "message")
		case *rpc.ConnectRequest_Trailer:
			out = append(out, "trailer")
		case *rpc.ConnectRequest_Error:
			out = append(out, "error")
		default:
			out = append(out, "other")
		}
	}
	return out
}

const method = "/tunnelbench.test.S/M"

func newStream(t *testing.T, tun Sender, md metadata.MD, maxMsg int) *Stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return New(ctx, cancel, tun, method, md, maxMsg)
}

func TestAnswerIsHeaderMessagesTrailer(t *testing.T) {
	tun := &recorder{}
	s := newStream(t, tun, nil, 1<<20)
	if err := s.SendMsg(&grpctool.RawFrame{Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(&grpctool.RawFrame{Data: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	s.Finish(nil)
	if got, want := tun.kinds(), []string{"header", "message", "message", "trailer"}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	if tun.sent[0] != emptyHeaderMsg || tun.sent[3] != emptyTrailerMsg {
		t.Error("an empty header or trailer was built again instead of reusing the shared message")
	}
}

func TestErrorAloneIsTrailersOnly(t *testing.T) {
	tun := &recorder{}
	s := newStream(t, tun, nil, 1<<20)
	s.Finish(status.Error(codes.NotFound, "no such thing"))
	if got, want := tun.kinds(), []string{"error"}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	if st := tun.sent[0].GetError().GetStatus(); codes.Code(st.GetCode()) != codes.NotFound || st.GetMessage() != "no such thing" {
		t.Fatalf("error %v", st)
	}
}

// A plain context error becomes its status, as grpc.Server makes it one; metadata set by the handler
// is sent before it.
func TestErrorAfterMetadataKeepsIt(t *testing.T) {
	tun := &recorder{}
	s := newStream(t, tun, nil, 1<<20)
	if err := grpc.SetHeader(s.Context(), metadata.Pairs("h", "1")); err != nil {
		t.Fatal(err)
	}
	if err := grpc.SetTrailer(s.Context(), metadata.Pairs("t", "2")); err != nil {
		t.Fatal(err)
	}
	s.Finish(context.DeadlineExceeded)
	if got, want := tun.kinds(), []string{"header", "trailer", "error"}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	if md := rpc.ValuesToMeta(tun.sent[0].GetHeader().GetMeta()); md.Get("h")[0] != "1" {
		t.Errorf("header %v", md)
	}
	if md := rpc.ValuesToMeta(tun.sent[1].GetTrailer().GetMeta()); md.Get("t")[0] != "2" {
		t.Errorf("trailer %v", md)
	}
	if c := codes.Code(tun.sent[2].GetError().GetStatus().GetCode()); c != codes.DeadlineExceeded {
		t.Errorf("code %v, want DeadlineExceeded", c)
	}
}

func TestHeaderOnceThenRefused(t *testing.T) {
	tun := &recorder{}
	s := newStream(t, tun, nil, 1<<20)
	if err := s.SendHeader(metadata.Pairs("a", "1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHeader(metadata.Pairs("b", "2")); status.Code(err) != codes.Internal {
		t.Fatalf("SetHeader after the header went: %v, want Internal", err)
	}
	if err := grpc.SendHeader(s.Context(), nil); status.Code(err) != codes.Internal {
		t.Fatalf("grpc.SendHeader after the header went: %v, want Internal", err)
	}
	if got := tun.kinds(); !slices.Equal(got, []string{"header"}) {
		t.Fatalf("sent %v, want one header", got)
	}
}

func TestHandlerContextKnowsCallAndPeer(t *testing.T) {
	s := newStream(t, &recorder{}, metadata.Pairs("k", "v"), 1<<20)
	ctx := s.Context()
	if m, ok := grpc.Method(ctx); !ok || m != method {
		t.Errorf("method %q %v", m, ok)
	}
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("k")) != 1 {
		t.Errorf("incoming metadata %v", md)
	}
	if p, ok := peer.FromContext(ctx); !ok || p.Addr.Network() != "tunnel" {
		t.Errorf("peer %v", p)
	}
}

func TestMessagesOverTheLimitAreRefusedBothWays(t *testing.T) {
	tun := &recorder{}
	s := newStream(t, tun, nil, 4)
	if err := s.SendMsg(&grpctool.RawFrame{Data: make([]byte, 5)}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("send over the limit: %v, want ResourceExhausted", err)
	}
	if len(tun.kinds()) != 0 {
		t.Fatalf("sent %v for a refused message", tun.kinds())
	}
	never := make(chan struct{})
	s.Deliver(make([]byte, 5), nil, never)
	var f grpctool.RawFrame
	if err := s.RecvMsg(&f); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("receive over the limit: %v, want ResourceExhausted", err)
	}
	if err := s.SendMsg("not a message"); status.Code(err) != codes.Internal {
		t.Fatalf("send of a non-message: %v, want Internal", err)
	}
}

func TestRequestThenEOF(t *testing.T) {
	s := newStream(t, &recorder{}, nil, 1<<20)
	never := make(chan struct{})
	s.Deliver([]byte("one"), nil, never)
	s.CloseRequest()
	var f grpctool.RawFrame
	if err := s.RecvMsg(&f); err != nil || string(f.Data) != "one" {
		t.Fatalf("first: %q %v", f.Data, err)
	}
	if err := s.RecvMsg(&f); !errors.Is(err, io.EOF) {
		t.Fatalf("after close_send: %v, want io.EOF", err)
	}
}

// A send on a tunnel kas closed ends the call: the handler's context is done before it hears Canceled.
func TestFailedSendEndsTheCall(t *testing.T) {
	tun := &recorder{broken: true}
	s := newStream(t, tun, nil, 1<<20)
	err := s.SendMsg(&grpctool.RawFrame{Data: []byte("x")})
	if status.Code(err) != codes.Canceled {
		t.Fatalf("send on a broken tunnel: %v, want Canceled", err)
	}
	if s.Context().Err() == nil {
		t.Fatal("the handler's context is not done after a failed send")
	}
	if err := s.SendMsg(&grpctool.RawFrame{Data: []byte("y")}); status.Code(err) != codes.Canceled {
		t.Fatalf("next send: %v, want Canceled", err)
	}
	s.Finish(nil) // sends nothing more on a broken tunnel, and does not panic
}

// pooledRecorder is a recorder that also takes pooled messages, as a gRPC stream does.
type pooledRecorder struct {
	recorder
	pooled []*rpc.PooledMessage
}

func (r *pooledRecorder) SendPooled(m *rpc.PooledMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pooled = append(r.pooled, m)
	return nil
}

// A message too large for a batch is encoded into a pooled buffer and sent as a PooledMessage whose bytes
// are the message's; a small one goes as a ConnectRequest; one above the limit is refused before any
// encoding. A Sender without pooled sends gets the ConnectRequest either way.
func TestLargeMessagesGoPooled(t *testing.T) {
	big := &rpc.Message{Data: make([]byte, 2*rpc.BatchMaxBytes)}
	for i := range big.Data {
		big.Data[i] = byte(i)
	}
	small := &rpc.Message{Data: []byte("small")}

	r := &pooledRecorder{}
	s := New(context.Background(), func() {}, r, "/s/m", nil, 1<<20)
	if err := s.SendMsg(small); err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(big); err != nil {
		t.Fatal(err)
	}
	if got := r.kinds(); !slices.Equal(got, []string{"header", "message"}) || len(r.pooled) != 1 {
		t.Fatalf("sent %v and %d pooled, want header, message and the large one pooled", got, len(r.pooled))
	}
	var got rpc.Message
	if err := proto.Unmarshal(*r.pooled[0].Data, &got); err != nil || !bytes.Equal(got.GetData(), big.GetData()) {
		t.Fatalf("the pooled message holds %d bytes (%v), want the large message's encoding", len(got.GetData()), err)
	}
	tooLarge := &rpc.Message{Data: make([]byte, 2<<20)}
	if err := s.SendMsg(tooLarge); status.Code(err) != codes.ResourceExhausted || len(r.pooled) != 1 {
		t.Fatalf("a message above the limit: %v, %d pooled; want ResourceExhausted and nothing sent", err, len(r.pooled))
	}

	plain := &recorder{}
	s = New(context.Background(), func() {}, plain, "/s/m", nil, 1<<20)
	if err := s.SendMsg(big); err != nil {
		t.Fatal(err)
	}
	if got := plain.kinds(); !slices.Equal(got, []string{"header", "message"}) {
		t.Fatalf("without pooled sends: sent %v, want header and message", got)
	}
	if err := proto.Unmarshal(plain.sent[1].GetMessage().GetData(), &got); err != nil || !bytes.Equal(got.GetData(), big.GetData()) {
		t.Fatalf("without pooled sends: the message holds %d bytes (%v)", len(got.GetData()), err)
	}
}

// puttingPool is grpctool.PayloadPool's pool, recording what is put back.
type puttingPool struct {
	mem.BufferPool
	put []*[]byte
}

func (p *puttingPool) Put(b *[]byte) { p.put = append(p.put, b) }

// A pooled request message goes back to its pool once the handler decoded it; one the handler takes
// raw stays with the handler.
func TestPooledRequestsGoBackOnceDecoded(t *testing.T) {
	p := &puttingPool{BufferPool: mem.DefaultBufferPool()}
	old := grpctool.PayloadPool
	grpctool.PayloadPool = p
	t.Cleanup(func() { grpctool.PayloadPool = old })

	want := &rpc.Message{Data: bytes.Repeat([]byte("r"), grpctool.LargeMin)}
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(s *Stream) *[]byte {
		buf := p.Get(len(b))
		copy(*buf, b)
		s.Deliver(*buf, buf, make(chan struct{}))
		return buf
	}
	s := newStream(t, &recorder{}, nil, 1<<20)
	buf := deliver(s)
	var got rpc.Message
	if err := s.RecvMsg(&got); err != nil || !proto.Equal(&got, want) {
		t.Fatalf("decoded: %v", err)
	}
	if len(p.put) != 1 || p.put[0] != buf {
		t.Fatalf("%d buffers back after the decode, want the request's", len(p.put))
	}
	deliver(s)
	var raw grpctool.RawFrame
	if err := s.RecvMsg(&raw); err != nil || !bytes.Equal(raw.Data, b) || raw.Pooled != nil {
		t.Fatalf("taken raw: %v", err)
	}
	if len(p.put) != 1 {
		t.Fatal("a buffer went back while the handler holds its data")
	}
}
