package tunclient

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// waitBound bounds every wait of these tests: reaching it means what was awaited did not happen.
const waitBound = 10 * time.Second

// waitFor polls cond until it holds, at most waitBound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", waitBound, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitClosed waits for ch to be closed, at most waitBound.
func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	timer := time.NewTimer(waitBound)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("waited %v for %s", waitBound, what)
	}
}

// fakeKasConn is the agent's connection to kas without network or gRPC server: the pool's only use of
// it, ReverseTunnel.Connect, becomes a fakeKasStream that the test drives.
type fakeKasConn struct {
	// keepHalfClosed: a tunnel the agent half-closed stays open until the test ends it. Otherwise it
	// ends at once (EOF), as kas ends a withdrawn tunnel, or one whose call was answered.
	keepHalfClosed bool

	mu      sync.Mutex
	streams []*fakeKasStream
}

var _ grpc.ClientConnInterface = (*fakeKasConn)(nil)

func (k *fakeKasConn) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return status.Error(codes.Unimplemented, "the fake kas serves only streams")
}

func (k *fakeKasConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	s := &fakeKasStream{
		kas:    k,
		ctx:    ctx,
		method: method,
		bidi:   desc.ClientStreams && desc.ServerStreams,
		opened: time.Now(),
		in:     make(chan *rpc.ConnectResponse),
		ended:  make(chan struct{}),
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.streams = append(k.streams, s)
	return s, nil
}

// all is every tunnel the agent opened, in order.
func (k *fakeKasConn) all() []*fakeKasStream {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*fakeKasStream(nil), k.streams...)
}

func (k *fakeKasConn) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.streams)
}

// idle is the tunnels that sent their descriptor and were given no call, not half-closed and not ended.
func (k *fakeKasConn) idle() []*fakeKasStream {
	var idle []*fakeKasStream
	for _, s := range k.all() {
		if s.isIdle() {
			idle = append(idle, s)
		}
	}
	return idle
}

// halfClosed is how many tunnels the agent half-closed.
func (k *fakeKasConn) halfClosed() int {
	n := 0
	for _, s := range k.all() {
		if s.isHalfClosed() {
			n++
		}
	}
	return n
}

// nextIdle is an idle tunnel; the test fails when there is none.
func (k *fakeKasConn) nextIdle(t *testing.T) *fakeKasStream {
	t.Helper()
	idle := k.idle()
	if len(idle) == 0 {
		t.Fatal("no idle tunnel")
	}
	return idle[0]
}

// fakeKasStream is kas's view of one tunnel: what the agent sent, whether it half-closed, and the end
// the test chose.
type fakeKasStream struct {
	kas    *fakeKasConn
	ctx    context.Context
	method string
	bidi   bool
	opened time.Time
	in     chan *rpc.ConnectResponse // unbuffered: deliver returns once the agent has read the message
	ended  chan struct{}             // closed by end

	mu         sync.Mutex
	sent       []*rpc.ConnectRequest
	halfClosed bool
	gotCall    bool
	isEnded    bool
	endErr     error
	trailer    metadata.MD
}

var _ grpc.ClientStream = (*fakeKasStream)(nil)

func (s *fakeKasStream) Header() (metadata.MD, error) { return metadata.MD{}, nil }

func (s *fakeKasStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trailer.Copy()
}

func (s *fakeKasStream) Context() context.Context { return s.ctx }

func (s *fakeKasStream) CloseSend() error {
	s.mu.Lock()
	s.halfClosed = true
	s.mu.Unlock()
	if !s.kas.keepHalfClosed {
		s.end(nil, "")
	}
	return nil
}

// SendMsg records what the agent sends: the descriptor as the pool sends it (a RawFrame of an encoded
// ConnectRequest), and every later ConnectRequest. As on a gRPC stream, sending on a stream that is over
// fails with io.EOF.
func (s *fakeKasStream) SendMsg(m any) error {
	select {
	case <-s.ended:
		return io.EOF
	case <-s.ctx.Done():
		return io.EOF
	default:
	}
	var req *rpc.ConnectRequest
	switch m := m.(type) {
	case *grpctool.RawFrame:
		req = &rpc.ConnectRequest{}
		if err := proto.Unmarshal(m.Data, req); err != nil {
			return status.Errorf(codes.Internal, "fake kas: undecodable frame: %v", err)
		}
	case *rpc.ConnectRequest:
		req = proto.Clone(m).(*rpc.ConnectRequest)
	case *rpc.PooledMessage: // what the raw codec would put on the wire
		bs, _ := m.MarshalBuffers()
		req = &rpc.ConnectRequest{}
		err := proto.Unmarshal(bs.Materialize(), req)
		bs.Free()
		if err != nil {
			return status.Errorf(codes.Internal, "fake kas: undecodable pooled message: %v", err)
		}
	default:
		return status.Errorf(codes.Internal, "fake kas: cannot send %T", m)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.halfClosed {
		return status.Error(codes.Internal, "SendMsg called after CloseSend")
	}
	s.sent = append(s.sent, req)
	return nil
}

// RecvMsg returns what the test delivers, then the end it chose; a status when the agent cancels the
// stream.
func (s *fakeKasStream) RecvMsg(m any) error {
	select {
	case msg := <-s.in:
		// As the raw codec decodes what kas sent: the agent may receive into a message of its own.
		b, err := proto.Marshal(msg)
		if err != nil {
			return status.Errorf(codes.Internal, "fake kas: cannot encode %v: %v", msg, err)
		}
		return grpctool.UnmarshalFrame(b, m)
	case <-s.ended:
		return s.endErr // written before ended was closed
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

// end ends the stream as kas would: err nil is a clean end (io.EOF), a status error ends it with that
// status; reason, when set, is sent in the trailer rpc.TunnelEndReasonKey. Later ends are ignored.
func (s *fakeKasStream) end(err error, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isEnded {
		return
	}
	s.isEnded = true
	if err == nil {
		err = io.EOF
	}
	s.endErr = err
	if reason != "" {
		s.trailer = metadata.Pairs(rpc.TunnelEndReasonKey, reason)
	}
	close(s.ended)
}

// deliver sends msg to the agent and returns once the agent read it.
func (s *fakeKasStream) deliver(t *testing.T, msg *rpc.ConnectResponse) {
	t.Helper()
	timer := time.NewTimer(waitBound)
	defer timer.Stop()
	select {
	case s.in <- msg:
	case <-s.ended:
		t.Fatal("deliver on a tunnel that kas ended")
	case <-s.ctx.Done():
		t.Fatal("deliver on a tunnel that the agent cancelled")
	case <-timer.C:
		t.Fatalf("the agent did not read its tunnel for %v", waitBound)
	}
	if msg.GetRequestInfo() != nil {
		s.mu.Lock()
		s.gotCall = true
		s.mu.Unlock()
	}
}

// messages is a copy of what the agent sent.
func (s *fakeKasStream) messages() []*rpc.ConnectRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*rpc.ConnectRequest(nil), s.sent...)
}

func (s *fakeKasStream) isHalfClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.halfClosed
}

func (s *fakeKasStream) isIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent) > 0 && !s.gotCall && !s.halfClosed && !s.isEnded && s.ctx.Err() == nil
}

// fakeIdleClock stands in for time.AfterFunc as Config.afterFunc: MaxIdleTime passes when the test
// calls fire, never on its own.
type fakeIdleClock struct {
	mu     sync.Mutex
	timers []*fakeIdleTimer
}

type fakeIdleTimer struct {
	clock *fakeIdleClock
	d     time.Duration
	f     func()
	armed bool
}

func (c *fakeIdleClock) afterFunc(d time.Duration, f func()) idleTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeIdleTimer{clock: c, d: d, f: f, armed: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeIdleTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

func (t *fakeIdleTimer) Reset(d time.Duration) bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := t.armed
	t.armed, t.d = true, d
	return was
}

// armed is the duration of every armed timer.
func (c *fakeIdleClock) armed() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ds []time.Duration
	for _, t := range c.timers {
		if t.armed {
			ds = append(ds, t.d)
		}
	}
	return ds
}

// fire lets every armed timer expire, one after the other on the caller's goroutine, and returns how many
// did.
func (c *fakeIdleClock) fire() int {
	c.mu.Lock()
	var due []*fakeIdleTimer
	for _, t := range c.timers {
		if t.armed {
			t.armed = false
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
	return len(due)
}
