package request

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/mem"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// The pump tests run in synctest bubbles: synctest.Wait tells when the pump has done all it can, so that
// "it read nothing" and "it waits" are facts, not guesses after a sleep.

var testInfo = &rpc.RequestInfo{MethodName: "/test.Svc/M"}

// startPump starts a pump on a fake caller's stream that lives as long as the test.
func startPump(t *testing.T, limit int) (*Pump, *fakeStream) {
	src := newFakeStream(t.Context())
	return Start(src, testInfo, limit), src
}

func attach(t *testing.T, p *Pump) *recordingTarget {
	t.Helper()
	target := &recordingTarget{}
	if err := p.Attach(target); err != nil {
		t.Fatalf("attach: %v", err)
	}
	return target
}

// logged is the pump's replay log, the messages' data separated by spaces.
func logged(p *Pump) string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	var s []string
	for _, f := range p.log {
		s = append(s, string(f.Data))
	}
	return strings.Join(s, " ")
}

// A call waiting for a tunnel must hold none of its request: gRPC's flow control keeps the rest with the
// caller.
func TestPumpReadsNothingBeforeAttach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := startPump(t, DefaultReplayLimit)
		synctest.Wait()
		if n := src.recvs.Load(); n != 0 || src.tryFeed("early") {
			t.Fatalf("the pump read the request before it had a target (%d reads)", n)
		}
		target := attach(t, p)
		src.feed(t, "a")
		synctest.Wait()
		target.wantEvents(t, "BEGIN a")
	})
}

func TestPumpSendsFramesInOrderWithEndLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := startPump(t, DefaultReplayLimit)
		target := attach(t, p)
		for _, d := range []string{"a", "b", "c"} {
			src.feed(t, d)
		}
		src.halfClose(t)
		synctest.Wait()
		target.wantEvents(t, "BEGIN a b c END")
		if n := src.recvs.Load(); n != 4 || pumpRunning() {
			t.Fatalf("the pump read on after the half-close (%d reads, running %t)", n, pumpRunning())
		}
	})
}

func TestPumpReplaysLogToNextTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := startPump(t, DefaultReplayLimit)
		first := attach(t, p)
		src.feed(t, "a")
		src.feed(t, "b")
		synctest.Wait()
		if !p.Detach() {
			t.Fatal("a call the agent never accepted is not replayable")
		}
		src.feed(t, "c") // read with no target: kept for the next one
		synctest.Wait()
		second := attach(t, p)
		second.wantEvents(t, "BEGIN a b c") // replayed within Attach
		src.feed(t, "d")
		src.halfClose(t)
		synctest.Wait()
		second.wantEvents(t, "BEGIN a b c d END")
		first.wantEvents(t, "BEGIN a b")
	})
}

func TestPumpKeepsNoLogOnceAccepted(t *testing.T) {
	for _, tc := range []struct {
		name       string
		afterFeeds []string // read between Accept and Detach
		want       string
	}{
		{name: "no frame after accept", want: "BEGIN a"},
		{name: "frames after accept", afterFeeds: []string{"b", "c"}, want: "BEGIN a b c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, src := startPump(t, DefaultReplayLimit)
				first := attach(t, p)
				src.feed(t, "a")
				synctest.Wait()
				p.Accept()
				if got := logged(p); got != "" {
					t.Fatalf("the agent accepted the call, the pump still keeps %q", got)
				}
				for _, d := range tc.afterFeeds {
					src.feed(t, d)
				}
				synctest.Wait()
				first.wantEvents(t, tc.want)
				if got := logged(p); got != "" {
					t.Fatalf("the pump logged %q after the agent accepted the call", got)
				}
				if p.Detach() {
					t.Fatal("Detach reports an accepted call replayable")
				}
				attach(t, p).wantEvents(t, "BEGIN") // nothing to replay
			})
		})
	}
}

// With no target, a log at the replay limit is the only copy of the request: the pump must neither drop
// it nor grow it, but stop reading until a target takes it.
func TestPumpWaitsWithFullLogUntilTargetAttaches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := startPump(t, 4)
		attach(t, p)
		p.Detach()
		src.feed(t, "abc") // 3 bytes: kept
		src.feed(t, "de")  // 5 bytes in all, over the limit: held, and the pump waits
		synctest.Wait()
		if src.tryFeed("f") {
			t.Fatal("the pump read on with a full log and no target")
		}
		if got := logged(p); got != "abc" {
			t.Fatalf("waiting pump logged %q, want %q", got, "abc")
		}
		second := attach(t, p)
		synctest.Wait()
		second.wantEvents(t, "BEGIN abc de")
		src.feed(t, "f")
		synctest.Wait()
		second.wantEvents(t, "BEGIN abc de f")
		if p.Detach() {
			t.Fatal("a request over the replay limit was kept to replay")
		}
	})
}

// A target that attaches exactly as frames arrive gets each frame once, in order: from the log or live,
// never both and never neither.
func TestPumpAttachRacesWithFrames(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			p, src := startPump(t, DefaultReplayLimit)
			attach(t, p)
			p.Detach()
			go func() {
				for _, d := range []string{"a", "b", "c", "d"} {
					src.frames <- fedFrame{Frame: Frame{Data: []byte(d)}}
				}
				src.frames <- fedFrame{Frame: Frame{End: true}}
			}()
			second := attach(t, p)
			synctest.Wait()
			second.wantEvents(t, "BEGIN a b c d END")
		})
	}
}

// A call waiting for a tunnel has no reader goroutine: the pump starts one at its first attach.
func TestPumpHasNoGoroutineBeforeAttach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := startPump(t, DefaultReplayLimit)
		synctest.Wait()
		if pumpRunning() {
			t.Fatal("a pump runs before it has a target")
		}
		attach(t, p)
		synctest.Wait()
		if !pumpRunning() {
			t.Fatal("no pump runs once it has a target")
		}
	})
}

func TestPumpEndsWithCallContext(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, p *Pump, src *fakeStream)
	}{
		{name: "while reading", setup: func(t *testing.T, p *Pump, _ *fakeStream) { attach(t, p) }},
		{name: "while waiting with a full log", setup: func(t *testing.T, p *Pump, src *fakeStream) {
			attach(t, p)
			p.Detach()
			src.feed(t, "abc")
			src.feed(t, "de")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				src := newFakeStream(ctx)
				p := Start(src, testInfo, 4)
				tc.setup(t, p, src)
				synctest.Wait()
				if !pumpRunning() {
					t.Fatal("the pump ended before the call did")
				}
				cancel()
				synctest.Wait()
				if pumpRunning() {
					t.Fatal("the pump goes on after the call ended")
				}
			})
		})
	}
}

// A one-request call's message and half-close are read on the attaching goroutine: when
// AttachWhole returns, the target has the whole request and no reader goroutine is left.
func TestAttachWholeReadsTheRequestInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := startPump(t, DefaultReplayLimit)
		go func() {
			src.feed(t, "a")
			src.halfClose(t)
		}()
		target := &recordingTarget{}
		if err := p.AttachWhole(target, 1); err != nil {
			t.Fatal(err)
		}
		if got := target.got(); got != "BEGIN a END" {
			t.Fatalf("when AttachWhole returned the target had %q, want the whole request", got)
		}
		synctest.Wait()
		if n := src.recvs.Load(); n != 2 {
			t.Fatalf("%d reads, want 2 (the message and the half-close), none more", n)
		}
	})
}

// A caller that sends more than the one request its method takes still gets every frame through, in
// order: the rest goes through a reader of its own.
func TestAttachWholeHandsTheRestToAReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := startPump(t, DefaultReplayLimit)
		go func() {
			for _, d := range []string{"a", "b", "c"} {
				src.feed(t, d)
			}
			src.halfClose(t)
		}()
		target := &recordingTarget{}
		if err := p.AttachWhole(target, 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		target.wantEvents(t, "BEGIN a b c END")
	})
}

// A provisional target gets the half-close even after a first message over the replay limit: the log
// can always replay it, and a gateway that reads a one-message request whole waits for it before it
// says it took the call. A message more waits; so does an empty one, which would grow the log too.
func TestProvisionalTargetGetsTheHalfCloseOverTheLimit(t *testing.T) {
	for _, end := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			p, src := startPump(t, 4)
			target := &recordingTarget{}
			if err := p.AttachProvisional(target); err != nil {
				t.Fatal(err)
			}
			src.feed(t, "abcdef") // over the limit, and kept: the first frame
			if end {
				src.halfClose(t)
				synctest.Wait()
				target.wantEvents(t, "BEGIN abcdef END")
				if !p.Detach() {
					t.Fatal("the provisional call cannot be replayed")
				}
				return
			}
			src.feed(t, "")
			synctest.Wait()
			target.wantEvents(t, "BEGIN abcdef")
			if src.tryFeed("g") {
				t.Fatal("the pump read on past the replay limit with a provisional target")
			}
			p.Confirm()
			synctest.Wait()
			target.wantEvents(t, "BEGIN abcdef ")
		})
	}
}

// writingTarget is a target whose writes outlive Send, as gRPC's do: each pooled frame it gets, it keeps
// with a reference of its own until release.
type writingTarget struct {
	recordingTarget
	held []mem.Buffer
}

func (w *writingTarget) Send(f Frame) error {
	if f.Buf != nil {
		if !bytes.Equal(f.Data, f.Buf.ReadOnlyData()) {
			return errors.New("a pooled frame's data is not its buffer")
		}
		f.Buf.Ref()
		w.held = append(w.held, f.Buf)
	}
	return w.recordingTarget.Send(f)
}

func (w *writingTarget) release() {
	for _, b := range w.held {
		b.Free()
	}
	w.held = nil
}

// readable reports whether b can still be read (it panics once the last reference went), and whether
// it still holds want.
func readable(b mem.Buffer, want []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return bytes.Equal(b.ReadOnlyData(), want)
}

// A large request of a caller in kas's process is a pooled buffer counted by references: the replay log
// holds one until the agent accepts the call, each write one of its own (a replay too), and the buffer
// goes back to the pool only when the last of them lets go, whatever the order, never while one of them
// could still read it.
func TestPumpPooledFrameLivesWhileHeld(t *testing.T) {
	data := bytes.Repeat([]byte("pooled request "), 4<<10) // above gRPC's pooling threshold
	for _, acceptFirst := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			p, src := startPump(t, DefaultReplayLimit)
			first := &writingTarget{}
			if err := p.Attach(first); err != nil {
				t.Fatal(err)
			}
			src.feedPooled(t, data)
			synctest.Wait()
			if len(first.held) != 1 {
				t.Fatalf("the first target got %d pooled frames, want 1", len(first.held))
			}
			buf := first.held[0]
			if !p.Detach() {
				t.Fatal("a call the agent never accepted is not replayable")
			}
			second := &writingTarget{}
			if err := p.Attach(second); err != nil {
				t.Fatal(err)
			}
			if len(second.held) != 1 || second.held[0] != buf {
				t.Fatalf("the replay got %d pooled frames, want the same buffer once", len(second.held))
			}
			if acceptFirst {
				p.Accept() // the log lets go first: the writes still hold the buffer
				first.release()
				if !readable(buf, data) {
					t.Fatal("the buffer went back while a write held it")
				}
				second.release()
			} else {
				first.release()
				second.release()
				if !readable(buf, data) {
					t.Fatal("the buffer went back while the replay log held it")
				}
				p.Accept()
			}
			if readable(buf, data) {
				t.Fatal("the buffer is still held after everyone let go")
			}
		})
	}
}
