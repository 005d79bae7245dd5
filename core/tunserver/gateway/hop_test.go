package gateway

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/grpctool/pooltest"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
)

// fakeHop is the gateway's end of a hop stream, driven by a test.
type fakeHop struct {
	ctx  context.Context
	in   chan []byte
	out  chan *rpc.GatewayResponse
	done chan struct{}
	// pool, when set, is where received messages come from, as gRPC's buffers do (one buffer each).
	pool mem.BufferPool
}

func newFakeHop(ctx context.Context) *fakeHop {
	return &fakeHop{ctx: ctx, in: make(chan []byte, 16), out: make(chan *rpc.GatewayResponse, 16), done: make(chan struct{})}
}

func (f *fakeHop) Context() context.Context     { return f.ctx }
func (f *fakeHop) SetHeader(metadata.MD) error  { return nil }
func (f *fakeHop) SendHeader(metadata.MD) error { return nil }
func (f *fakeHop) SetTrailer(metadata.MD)       {}

func (f *fakeHop) SendMsg(m any) error {
	f.out <- m.(*rpc.GatewayResponse)
	return nil
}

func (f *fakeHop) RecvMsg(m any) error {
	select {
	case b, ok := <-f.in:
		if !ok {
			return io.EOF
		}
		if f.pool == nil {
			m.(*grpctool.RawFrame).Data = b
			return nil
		}
		// As gRPC: the message in a buffer of the pool, freed once the codec returned.
		buf := f.pool.Get(len(b))
		copy(*buf, b)
		data := mem.NewBuffer(buf, f.pool)
		defer data.Free()
		return grpctool.RawCodec{}.Unmarshal(mem.BufferSlice{data}, m)
	case <-f.done:
		return status.Error(codes.Canceled, "the stream ended")
	}
}

func (f *fakeHop) send(t *testing.T, msgs ...*rpc.HopRequest) {
	t.Helper()
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		f.in <- b
	}
}

func hopStart(method string) *rpc.HopRequest {
	return &rpc.HopRequest{Msg: &rpc.HopRequest_Start{Start: &rpc.HopStart{Method: method,
		Meta: map[string]*rpc.Values{"tag": {Value: [][]byte{[]byte(method)}}}}}}
}

func hopMsg(s string) *rpc.HopRequest {
	return &rpc.HopRequest{Msg: &rpc.HopRequest_Message{Message: []byte(s)}}
}

var hopClose = &rpc.HopRequest{Msg: &rpc.HopRequest_CloseSend{CloseSend: &rpc.CloseSend{}}}

// callEndOf waits for the next call_end and returns its status code.
func (f *fakeHop) callEnd(t *testing.T) codes.Code {
	t.Helper()
	select {
	case m := <-f.out:
		if m.GetCallEnd() == nil {
			t.Fatalf("got %v, want call_end", m)
		}
		return codes.Code(m.GetCallEnd().GetStatus().GetCode())
	case <-time.After(10 * time.Second):
		t.Fatal("no call_end")
		return 0
	}
}

// recvAll reads a call's request to its half-close.
func recvAll(s grpc.ServerStream) ([]string, error) {
	var got []string
	for {
		var f grpctool.RawFrame
		if err := s.RecvMsg(&f); err != nil {
			if err == io.EOF {
				return got, nil
			}
			return got, err
		}
		got = append(got, string(f.Data))
	}
}

// The rest of a request that a call's handler did not read, and a close_send after call_end, never reach
// the next call; each call sees its own method and metadata.
func TestHopCallsSeeOnlyTheirOwnRequest(t *testing.T) {
	g, err := New(Config{Registry: registry.New(nil, 1)})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []string, 4)
	g.serveCall = func(s grpc.ServerStream) error {
		m, _ := grpc.MethodFromServerStream(s)
		md, _ := metadata.FromIncomingContext(s.Context())
		if tag := md.Get("tag"); len(tag) != 1 || tag[0] != m {
			return status.Errorf(codes.Internal, "call %s has metadata tag %v", m, tag)
		}
		if m == "/s/first" {
			var f grpctool.RawFrame
			if err := s.RecvMsg(&f); err != nil { // one of its three messages
				return err
			}
			got <- []string{string(f.Data)}
			return status.Error(codes.FailedPrecondition, "ends early")
		}
		msgs, err := recvAll(s)
		got <- msgs
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hop := newFakeHop(ctx)
	served := make(chan error, 1)
	go func() { served <- g.serveHop(hop) }()
	hop.send(t, hopStart("/s/first"), hopMsg("a1"), hopMsg("a2"))
	if c := hop.callEnd(t); c != codes.FailedPrecondition {
		t.Fatalf("first call ended %v, want FailedPrecondition", c)
	}
	hop.send(t, hopMsg("a3"), hopClose, hopStart("/s/second"), hopMsg("b1"), hopMsg("b2"), hopClose)
	if c := hop.callEnd(t); c != codes.OK {
		t.Fatalf("second call ended %v, want OK", c)
	}
	if first, second := <-got, <-got; len(first) != 1 || first[0] != "a1" || len(second) != 2 || second[0] != "b1" || second[1] != "b2" {
		t.Fatalf("the calls read %q and %q, want [a1] and [b1 b2]", first, second)
	}
	close(hop.in) // the routing kas is done with the stream
	if err := <-served; err != nil {
		t.Fatalf("serveHop: %v", err)
	}
}

// A large request message on a hop stream reaches a call that keeps it shared (the request pump) as the
// received buffer itself, counted by references, and the buffer goes back once the call let go; a call
// that does not ask gets the same bytes, and the buffer is left to the garbage collector.
func TestHopLargeRequestStaysShared(t *testing.T) {
	g, err := New(Config{Registry: registry.New(nil, 1)})
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("large hop message "), grpctool.LargeMin/8)
	type read struct {
		data   []byte
		shared bool
	}
	got := make(chan read, 2)
	g.serveCall = func(s grpc.ServerStream) error {
		m, _ := grpc.MethodFromServerStream(s)
		f := grpctool.RawFrame{KeepShared: m == "/s/shared"}
		if err := s.RecvMsg(&f); err != nil {
			return err
		}
		got <- read{data: bytes.Clone(f.Data), shared: f.Shared != nil}
		if f.Shared != nil {
			f.Shared.Free()
		}
		_, err := recvAll(s)
		return err
	}
	pool := pooltest.NewCountingPool()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hop := newFakeHop(ctx)
	hop.pool = pool
	served := make(chan error, 1)
	go func() { served <- g.serveHop(hop) }()
	large := &rpc.HopRequest{Msg: &rpc.HopRequest_Message{Message: payload}}
	hop.send(t, hopStart("/s/shared"), large, hopClose)
	if c := hop.callEnd(t); c != codes.OK {
		t.Fatalf("the shared call ended %v, want OK", c)
	}
	if r := <-got; !r.shared || !bytes.Equal(r.data, payload) {
		t.Fatalf("the call that keeps messages shared got shared %v, the payload %v", r.shared, bytes.Equal(r.data, payload))
	}
	if n := pool.Puts(); n != 1 { // the message's (start and close_send are too small to pool)
		t.Fatalf("%d buffers back after the shared call, want its message's", n)
	}
	hop.send(t, hopStart("/s/plain"), large, hopClose)
	if c := hop.callEnd(t); c != codes.OK {
		t.Fatalf("the plain call ended %v, want OK", c)
	}
	if r := <-got; r.shared || !bytes.Equal(r.data, payload) {
		t.Fatalf("the plain call got shared %v, the payload %v", r.shared, bytes.Equal(r.data, payload))
	}
	if n := pool.Puts(); n != 1 { // its message stays with the call
		t.Fatalf("%d buffers back after the plain call, want none more", n)
	}
	close(hop.in)
	if err := <-served; err != nil {
		t.Fatalf("serveHop: %v", err)
	}
}

// A start before the call under way ended breaks the protocol: the stream ends, and so does the call.
func TestHopStartBeforeCallEndEndsTheStream(t *testing.T) {
	g, err := New(Config{Registry: registry.New(nil, 1)})
	if err != nil {
		t.Fatal(err)
	}
	g.serveCall = func(s grpc.ServerStream) error {
		<-s.Context().Done() // a call that would run forever
		return s.Context().Err()
	}
	hop := newFakeHop(context.Background())
	defer close(hop.done)
	served := make(chan error, 1)
	go func() { served <- g.serveHop(hop) }()
	hop.send(t, hopStart("/s/a"), hopStart("/s/b"))
	select {
	case err := <-served:
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("serveHop: %v, want InvalidArgument", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveHop still runs")
	}
}

// A message before any start, and a message that is no HopRequest, end the stream.
func TestHopRefusesStrayMessages(t *testing.T) {
	for name, b := range map[string][]byte{"message first": mustMarshal(t, hopMsg("x")), "garbage": {0xff, 0xff, 0xff}} {
		g, err := New(Config{Registry: registry.New(nil, 1)})
		if err != nil {
			t.Fatal(err)
		}
		hop := newFakeHop(context.Background())
		served := make(chan error, 1)
		go func() { served <- g.serveHop(hop) }()
		hop.in <- b
		if err := <-served; status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: serveHop: %v, want InvalidArgument", name, err)
		}
		close(hop.done)
	}
}

// A draining gateway ends an idle hop stream with OK between calls: the routing kas's next call, if one
// was on its way, was not read.
func TestHopStreamEndsWhenDraining(t *testing.T) {
	g, err := New(Config{Registry: registry.New(nil, 1)})
	if err != nil {
		t.Fatal(err)
	}
	hop := newFakeHop(context.Background())
	defer close(hop.done)
	served := make(chan error, 1)
	go func() { served <- g.serveHop(hop) }()
	g.Drain()
	if err := <-served; err != nil {
		t.Fatalf("serveHop: %v, want nil", err)
	}
}

func mustMarshal(t *testing.T, m *rpc.HopRequest) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
