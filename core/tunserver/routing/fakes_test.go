package routing

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
)

// Fakes shared by the router and finder tests: the caller's stream, gateways and a finder for the
// Router; this kas's tunnels (source, handle, forwarder) and the private API (dialer, connection, gateway
// stream) for the Finder. None of them touches the network.

const (
	testAgentID = 42
	testMethod  = "/test.Svc/M"
	// waitBound bounds every wait of a test. Inside a synctest bubble it is fake time: it only passes
	// once nothing else can happen, so a test that would hang fails at once instead.
	waitBound = 10 * time.Second
)

// waitFor fails the test unless ch yields (or is closed) within waitBound. Call it from the test's
// goroutine only.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitBound):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// isClosed reports whether ch is closed (or has a value ready).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// events is a goroutine-safe record of what happened to a fake, in order.
type events struct {
	mu  sync.Mutex
	all []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, s)
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.all, " ")
}

// --- the caller's side, for the Router ---

// fakeTransportStream gives grpc.MethodFromServerStream the call's method.
type fakeTransportStream struct{ method string }

func (s fakeTransportStream) Method() string             { return s.method }
func (fakeTransportStream) SetHeader(metadata.MD) error  { return nil }
func (fakeTransportStream) SendHeader(metadata.MD) error { return nil }
func (fakeTransportStream) SetTrailer(metadata.MD) error { return nil }

// fakeServerStream is a routed call as the Router sees it: its request messages, then the half-close;
// what the Router answers is recorded.
type fakeServerStream struct {
	ctx    context.Context
	cancel context.CancelFunc
	in     chan []byte // closed: the caller half-closed
	sent   events      // "header:<keys>" and each message's data
	mu     sync.Mutex
	trail  metadata.MD
}

// newCallStream returns a call of method with incoming metadata md and the given request messages, on
// ctx (which may carry auth.WithCaller). The stream's context ends with the test, as a gRPC stream's ends
// when its handler returns.
func newCallStream(t *testing.T, ctx context.Context, method string, md metadata.MD, request ...string) *fakeServerStream {
	ctx = grpc.NewContextWithServerTransportStream(ctx, fakeTransportStream{method: method})
	ctx, cancel := context.WithCancel(metadata.NewIncomingContext(ctx, md))
	t.Cleanup(cancel)
	s := &fakeServerStream{ctx: ctx, cancel: cancel, in: make(chan []byte, len(request))}
	for _, r := range request {
		s.in <- []byte(r)
	}
	close(s.in)
	return s
}

// agentMD is the metadata of a call for agent id, with extra key-value pairs.
func agentMD(id string, kv ...string) metadata.MD {
	return metadata.Join(metadata.Pairs(rpc.RoutingAgentIDMetadataKey, id), metadata.Pairs(kv...))
}

func (s *fakeServerStream) Context() context.Context { return s.ctx }

func (s *fakeServerStream) RecvMsg(m any) error {
	select {
	case b, ok := <-s.in:
		if !ok {
			return io.EOF
		}
		m.(*grpctool.RawFrame).Data = b
		return nil
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

func (s *fakeServerStream) SendMsg(m any) error {
	s.sent.add(string(m.(*grpctool.RawFrame).Data))
	return nil
}

func (s *fakeServerStream) SetHeader(metadata.MD) error { return nil }

func (s *fakeServerStream) SendHeader(md metadata.MD) error {
	s.sent.add("header:" + strings.Join(md.Get("x-answer"), ","))
	return nil
}

func (s *fakeServerStream) SetTrailer(md metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trail = metadata.Join(s.trail, md)
}

func (s *fakeServerStream) trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trail
}

// fakeFinder finds gateways with find, recording every request.
type fakeFinder struct {
	find  func(ctx context.Context, req FindRequest) (Gateway, error)
	mu    sync.Mutex
	reqs  []FindRequest
	calls atomic.Int32
}

func (f *fakeFinder) FindGateway(ctx context.Context, req FindRequest) (Gateway, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	return f.find(ctx, req)
}

// findsInTurn is a finder that returns gws one after the other, and a find timeout when none is left.
func findsInTurn(gws ...Gateway) *fakeFinder {
	var mu sync.Mutex
	return &fakeFinder{find: func(context.Context, FindRequest) (Gateway, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(gws) == 0 {
			return nil, &findTimeoutError{timeout: time.Millisecond}
		}
		gw := gws[0]
		gws = gws[1:]
		return gw, nil
	}}
}

// fakeGateway forwards a call with forward (answering nothing when nil) and counts its releases.
type fakeGateway struct {
	url      string
	forward  func(ctx context.Context, pump *request.Pump, w *callerWriter) error
	released atomic.Int32
}

func (g *fakeGateway) Forward(ctx context.Context, pump *request.Pump, w *callerWriter) error {
	if g.forward == nil {
		return nil
	}
	return g.forward(ctx, pump, w)
}
func (g *fakeGateway) URL() string { return g.url }
func (g *fakeGateway) Release()    { g.released.Add(1) }

// testCaller is an authenticated caller (see auth.WithCaller).
type testCaller string

func (testCaller) MayReach(int64) bool { return true }

// --- this kas's tunnels, for the Finder ---

// fakeSource is this kas's registry with one handle: found at once or not. presence is what it says of
// the agent (presence.AgentAbsent unless a test sets it).
type fakeSource struct {
	found    bool
	handle   *fakeHandle
	presence atomic.Int32
}

func (s *fakeSource) FindTunnel(int64, string, string) (bool, registry.Handle) {
	return s.found, s.handle
}

func (s *fakeSource) Presence(int64, string, string) presence.Presence {
	return presence.Presence(s.presence.Load())
}

func (s *fakeSource) setPresence(p presence.Presence) { s.presence.Store(int32(p)) }

// fakeHandle is a call's claim on a tunnel of this kas: Get returns the tunnel once ready is closed.
type fakeHandle struct {
	ready    chan struct{}
	done     chan struct{} // closed by the first Done
	doneOnce sync.Once
	tunnel   *fakeForwarder
}

func newHandle() *fakeHandle {
	return &fakeHandle{ready: make(chan struct{}), done: make(chan struct{}), tunnel: &fakeForwarder{}}
}

func (h *fakeHandle) Get(ctx context.Context) (registry.Forwarder, error) {
	select {
	case <-h.ready:
		return h.tunnel, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *fakeHandle) Done() { h.doneOnce.Do(func() { close(h.done) }) }

type fakeForwarder struct{}

func (*fakeForwarder) Forward(context.Context, *request.Pump, registry.Sink) error {
	return nil
}
func (*fakeForwarder) AgentID() int64 { return testAgentID }

func (*fakeForwarder) OneRequest(string, string) bool { return false }

// --- other kas, for the Finder ---

// fakeDialer dials fake gateway kas: each stream opened is handed to the test on streams, with what its
// gateway answers at once (script) already queued.
type fakeDialer struct {
	mu      sync.Mutex
	dials   map[string]int
	script  map[string][]recvItem
	streams chan *fakeClientStream
	// holdStart, when set, holds every start_streaming that was sent until it is closed.
	holdStart chan struct{}
}

func newDialer() *fakeDialer {
	return &fakeDialer{dials: map[string]int{}, script: map[string][]recvItem{}, streams: make(chan *fakeClientStream, 64)}
}

func (d *fakeDialer) Conn(u string) (grpc.ClientConnInterface, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials[u]++
	return &fakeConn{d: d, url: u}, nil
}

func (d *fakeDialer) dialed(u string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials[u]
}

func (d *fakeDialer) totalDials() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.dials {
		n += c
	}
	return n
}

// answer makes every stream to gateway u receive items at once.
func (d *fakeDialer) answer(u string, items ...recvItem) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.script[u] = items
}

type fakeConn struct {
	d   *fakeDialer
	url string
}

func (c *fakeConn) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return status.Error(codes.Unimplemented, "the private API has no unary methods")
}

func (c *fakeConn) NewStream(ctx context.Context, _ *grpc.StreamDesc, method string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	s := newClientStream(ctx, c.url, method)
	s.holdStart = c.d.holdStart
	c.d.mu.Lock()
	for _, it := range c.d.script[c.url] {
		s.recv <- it
	}
	c.d.mu.Unlock()
	c.d.streams <- s
	return s, nil
}

// recvItem is one thing a gateway stream receives: a message, or the end of the stream.
type recvItem struct {
	msg *rpc.GatewayResponse
	err error
}

var (
	noTunnel    = recvItem{msg: &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_NoTunnel_{NoTunnel: &rpc.GatewayResponse_NoTunnel{}}}}
	tunnelReady = recvItem{msg: &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_TunnelReady_{TunnelReady: &rpc.GatewayResponse_TunnelReady{}}}}
	gatewayEOF  = recvItem{err: io.EOF}
)

// fakeClientStream is a gateway stream on the private API: it receives what the test queues and records
// what kas sends: "start_streaming", each message's data, "END" for the half-close.
type fakeClientStream struct {
	ctx         context.Context
	url, method string
	recv        chan recvItem
	sent        events
	started     chan struct{} // closed on start_streaming
	halfClosed  chan struct{} // closed on CloseSend
	holdStart   chan struct{} // see fakeDialer.holdStart
	mu          sync.Mutex
	trailer     metadata.MD
}

func newClientStream(ctx context.Context, url, method string) *fakeClientStream {
	return &fakeClientStream{ctx: ctx, url: url, method: method, recv: make(chan recvItem, 16),
		started: make(chan struct{}), halfClosed: make(chan struct{})}
}

// reply queues what the gateway sends next.
func (s *fakeClientStream) reply(items ...recvItem) {
	for _, it := range items {
		s.recv <- it
	}
}

// cancelled reports whether kas ended the stream.
func (s *fakeClientStream) cancelled() bool { return s.ctx.Err() != nil }

func (s *fakeClientStream) Header() (metadata.MD, error) { return nil, nil }
func (s *fakeClientStream) Context() context.Context     { return s.ctx }

func (s *fakeClientStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trailer
}

func (s *fakeClientStream) setTrailer(md metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = md
}

func (s *fakeClientStream) CloseSend() error {
	s.sent.add("END")
	close(s.halfClosed)
	return nil
}

func (s *fakeClientStream) SendMsg(m any) error {
	if s.ctx.Err() != nil {
		return io.EOF // as gRPC: the stream's status comes from RecvMsg
	}
	switch m := m.(type) {
	case *rpc.StartStreaming:
		s.sent.add("start_streaming")
		close(s.started)
		if s.holdStart != nil {
			<-s.holdStart
		}
	case *grpctool.RawFrame:
		s.sent.add(string(m.Data))
	}
	return nil
}

func (s *fakeClientStream) RecvMsg(m any) error {
	select {
	case it := <-s.recv:
		if it.err != nil {
			return it.err
		}
		b, err := proto.Marshal(it.msg)
		if err != nil {
			return err
		}
		return grpctool.UnmarshalFrame(b, m)
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}
