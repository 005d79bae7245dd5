package request

import (
	"context"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// Fakes shared by this package's tests. None of them touches the network.

// waitBound bounds every wait of a test. Inside a synctest bubble it is fake time: it only passes once
// nothing else can happen, so a test that would hang fails at once instead.
const waitBound = 10 * time.Second

// fakeStream is a caller's stream as the pump reads it: RecvMsg returns what the test feeds it, one
// frame at a time, and fails as gRPC does once the call's context ends. The methods the pump must not
// use are those of the nil embedded interface: they panic.
type fakeStream struct {
	grpc.ServerStream
	ctx    context.Context
	frames chan fedFrame // unbuffered: a feed completes only when the pump has taken the frame
	recvs  atomic.Int32
}

// fedFrame is a frame for RecvMsg; pooled, when set, is a buffer of grpctool.PayloadPool that the frame's
// Data is, handed on as grpctool.RawCodec and InProcessConn hand on a large request (RawFrame.KeepShared).
type fedFrame struct {
	Frame
	pooled *[]byte
}

func newFakeStream(ctx context.Context) *fakeStream {
	return &fakeStream{ctx: ctx, frames: make(chan fedFrame)}
}

func (s *fakeStream) Context() context.Context { return s.ctx }

func (s *fakeStream) RecvMsg(m any) error {
	s.recvs.Add(1)
	select {
	case f := <-s.frames:
		if f.End {
			return io.EOF
		}
		raw := m.(*grpctool.RawFrame)
		raw.Data = f.Data
		if f.pooled != nil {
			if !raw.KeepShared {
				return status.Error(codes.Internal, "fakeStream: a large request read without KeepShared")
			}
			raw.Shared = mem.NewBuffer(f.pooled, grpctool.PayloadPool)
		}
		return nil
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

// feed hands the pump one request message, failing the test unless the pump takes it within waitBound.
func (s *fakeStream) feed(t *testing.T, data string) {
	t.Helper()
	s.feedFrame(t, Frame{Data: []byte(data)})
}

// halfClose hands the pump the caller's half-close.
func (s *fakeStream) halfClose(t *testing.T) {
	t.Helper()
	s.feedFrame(t, Frame{End: true})
}

// feedPooled hands the pump a request message in a buffer of grpctool.PayloadPool, as a caller in kas's
// process sends a large one.
func (s *fakeStream) feedPooled(t *testing.T, data []byte) {
	t.Helper()
	buf := grpctool.PayloadPool.Get(len(data))
	copy(*buf, data)
	s.feedFed(t, fedFrame{Frame: Frame{Data: *buf}, pooled: buf})
}

func (s *fakeStream) feedFrame(t *testing.T, f Frame) {
	t.Helper()
	s.feedFed(t, fedFrame{Frame: f})
}

func (s *fakeStream) feedFed(t *testing.T, f fedFrame) {
	t.Helper()
	select {
	case s.frames <- f:
	case <-time.After(waitBound):
		t.Fatalf("the pump did not read %q", f.Data)
	}
}

// tryFeed offers a message without waiting: it reports whether the pump was reading.
func (s *fakeStream) tryFeed(data string) bool {
	select {
	case s.frames <- fedFrame{Frame: Frame{Data: []byte(data)}}:
		return true
	default:
		return false
	}
}

// recordingTarget records what the pump sends it: "BEGIN", each message's data, "END".
type recordingTarget struct {
	mu     sync.Mutex
	events []string
}

func (r *recordingTarget) Begin() error {
	r.add("BEGIN")
	return nil
}

func (r *recordingTarget) Send(f Frame) error {
	if f.End {
		r.add("END")
	} else {
		r.add(string(f.Data))
	}
	return nil
}

func (r *recordingTarget) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recordingTarget) got() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, " ")
}

// wantEvents fails the test unless the target got exactly want (events separated by spaces).
func (r *recordingTarget) wantEvents(t *testing.T, want string) {
	t.Helper()
	if got := r.got(); got != want {
		t.Fatalf("target got %q, want %q", got, want)
	}
}

// pumpRunning reports whether a pump goroutine is still running. Call it after synctest.Wait, when every
// goroutine has either ended or is blocked.
func pumpRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "request.(*Pump).run")
}
