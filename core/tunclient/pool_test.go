package tunclient

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient/reconnect"
)

// hourBackoff never ends within a test: a tunnel that backs off does not come back.
var hourBackoff = reconnect.Backoff{Initial: time.Hour, Max: time.Hour, Factor: 1, Jitter: 0}

// startPoolAgent starts an agent whose tunnels go to kas. A zero cfg.Backoff means hourBackoff. The
// agent is stopped at cleanup, with calls still in flight cancelled.
func startPoolAgent(t *testing.T, kas *fakeKasConn, cfg Config) *Agent {
	t.Helper()
	cfg.KasConn = kas
	if cfg.Backoff == (reconnect.Backoff{}) {
		cfg.Backoff = hourBackoff
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		select {
		case <-stopAsync(a, ctx):
		case <-time.After(waitBound):
			t.Errorf("Stop did not return within %v", waitBound)
		}
	})
	return a
}

// stopAsync runs a.Stop(ctx) and closes the channel it returns when Stop returned.
func stopAsync(a *Agent, ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Stop(ctx)
	}()
	return done
}

// poolCounts is the pool's goroutines, and those of them whose first tunnel is not idle yet.
func poolCounts(a *Agent) (total, spawned int) {
	a.pool.mu.Lock()
	defer a.pool.mu.Unlock()
	return a.pool.total, a.pool.spawned
}

// waitSettled waits until the pool has total goroutines in the state want, every newly opened tunnel
// idle.
func waitSettled(t *testing.T, a *Agent, want Stats, total int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d tunnels %+v", total, want), func() bool {
		n, spawned := poolCounts(a)
		return n == total && spawned == 0 && a.Stats() == want
	})
}

// requestInfo starts a health check on the tunnel it is delivered to: the service's handler then waits
// for the request message, and the tunnel stays busy.
var requestInfo = &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{MethodName: healthpb.Health_Check_FullMethodName}}}

// callOpens starts a call on the idle tunnel s and returns how many tunnels the pool opened for it. They
// are opened under the same lock that makes s busy: the count is exact once s is busy.
func callOpens(t *testing.T, a *Agent, s *fakeKasStream) int {
	t.Helper()
	busy := a.Stats().Busy
	before, _ := poolCounts(a)
	s.deliver(t, requestInfo)
	waitFor(t, "the tunnel to become busy", func() bool { return a.Stats().Busy == busy+1 })
	after, _ := poolCounts(a)
	return after - before
}

// finishCall sends the request of the health check started on s; it waits for the agent's answer (the
// agent half-closes after it) and checks it. The unary handler answers after its one request message,
// so kas's close_send, which could arrive after the answer and the end of the stream, is left out.
func finishCall(t *testing.T, s *fakeKasStream) {
	t.Helper()
	req, err := proto.Marshal(&healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s.deliver(t, &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: req}}})
	waitFor(t, "the agent to answer the call", s.isHalfClosed)
	sent := s.messages()
	if len(sent) != 4 || sent[1].GetHeader() == nil || sent[2].GetMessage() == nil || sent[3].GetTrailer() == nil {
		t.Fatalf("the agent answered %v, want descriptor, header, message, trailer", sent)
	}
	var resp healthpb.HealthCheckResponse
	if err := proto.Unmarshal(sent[2].GetMessage().GetData(), &resp); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health check answer %v, %v; want SERVING", &resp, err)
	}
}

// cycleClean ends the idle tunnel s cleanly, rounds times, each time waiting for its goroutine to
// reconnect, and returns the last tunnel. It is the bounded wait for what must happen in tests that show
// another tunnel did not reconnect: that one had all this time to do so wrongly.
func cycleClean(t *testing.T, a *Agent, kas *fakeKasConn, s *fakeKasStream, rounds int) *fakeKasStream {
	t.Helper()
	for range rounds {
		n := kas.count()
		s.end(nil, "")
		waitFor(t, "the tunnel to reconnect", func() bool {
			_, spawned := poolCounts(a)
			return kas.count() == n+1 && spawned == 0 && len(kas.idle()) == 1 && a.Stats().Idle == 1
		})
		s = kas.idle()[0]
	}
	return s
}

func TestPoolOpensMinIdleTunnelsThatSendTheirDescriptorFirst(t *testing.T) {
	kas := &fakeKasConn{}
	a := startPoolAgent(t, kas, Config{MinIdle: 3})
	waitSettled(t, a, Stats{Idle: 3}, 3)
	want := descriptorFor(a.GetServiceInfo(), nil)
	want.Reuse = true   // the agent asks for reusable tunnels unless it is single-use
	want.Batches = true // and offers batches on them unless told not to
	want.EndsOnRequest = true
	streams := kas.all()
	if len(streams) != 3 {
		t.Fatalf("%d tunnels opened, want MinIdle = 3", len(streams))
	}
	for i, s := range streams {
		if s.method != rpc.ReverseTunnel_Connect_FullMethodName || !s.bidi {
			t.Errorf("tunnel %d: %s (bidi %v), want the bidi stream %s", i, s.method, s.bidi, rpc.ReverseTunnel_Connect_FullMethodName)
		}
		sent := s.messages()
		if len(sent) != 1 || !proto.Equal(sent[0].GetDescriptor_(), want) {
			t.Errorf("tunnel %d sent %v, want only the descriptor %v", i, sent, want)
		}
		if s.isHalfClosed() {
			t.Errorf("tunnel %d: idle tunnel half-closed", i)
		}
	}
}

// Fewer than MinIdle idle tunnels: the pool opens the missing ones, at most ScaleUpStep at once and never
// more than MaxConnections in all.
func TestPoolScalesUpToMinIdleAtMostScaleUpStepAtOnce(t *testing.T) {
	kas := &fakeKasConn{}
	a := startPoolAgent(t, kas, Config{MinIdle: 4, ScaleUpStep: 2, MaxConnections: 7})
	waitSettled(t, a, Stats{Idle: 4}, 4)
	// Three tunnels break: they back off for an hour and leave one idle tunnel. Breaking opens nothing.
	streams := kas.all()
	for _, s := range streams[1:] {
		s.end(status.Error(codes.Unavailable, "connection reset"), "")
	}
	waitSettled(t, a, Stats{Connecting: 3, Idle: 1}, 4)

	// The last idle tunnel takes a call: four idle tunnels are missing, ScaleUpStep opens two.
	if n := callOpens(t, a, streams[0]); n != 2 {
		t.Fatalf("with 4 idle tunnels missing and ScaleUpStep 2, a call opened %d", n)
	}
	waitSettled(t, a, Stats{Connecting: 3, Idle: 2, Busy: 1}, 6)
	// Three are missing, but MaxConnections leaves room for one.
	if n := callOpens(t, a, kas.nextIdle(t)); n != 1 {
		t.Fatalf("with room for 1 below MaxConnections, a call opened %d", n)
	}
	waitSettled(t, a, Stats{Connecting: 3, Idle: 2, Busy: 2}, 7)
	// The pool is full: calls on the last idle tunnels open none.
	for range 2 {
		if n := callOpens(t, a, kas.nextIdle(t)); n != 0 {
			t.Fatalf("at MaxConnections, a call opened %d", n)
		}
	}
	waitSettled(t, a, Stats{Connecting: 3, Busy: 4}, 7)
	if n := kas.count(); n != 7 {
		t.Fatalf("%d tunnels opened in all, want MaxConnections = 7", n)
	}
}

// When calls pile up, the pool opens a quarter of the busy tunnels (at least the missing ones) at once,
// at most ScaleUpStep, never above MaxConnections.
func TestPoolScalesUpByAQuarterOfTheBusyTunnels(t *testing.T) {
	kas := &fakeKasConn{}
	a := startPoolAgent(t, kas, Config{MinIdle: 1, ScaleUpStep: 2, MaxConnections: 15})
	waitSettled(t, a, Stats{Idle: 1}, 1)
	// The k-th call (k busy tunnels) opens max(missing, k/4) tunnels, at most 2, when it takes the last
	// idle tunnel; none while another stays idle. The 14th is limited to 1 by MaxConnections, the 15th
	// to 0.
	want := []int{1, 1, 1, 1, 1, 1, 1, 2, 0, 2, 0, 2, 0, 1, 0}
	total := 1
	for k, w := range want {
		n := callOpens(t, a, kas.nextIdle(t))
		if n != w {
			t.Fatalf("call %d opened %d tunnels, want %d", k+1, n, w)
		}
		total += n
		waitSettled(t, a, Stats{Idle: total - (k + 1), Busy: k + 1}, total)
	}
	if total != 15 || kas.count() != 15 {
		t.Fatalf("%d goroutines, %d tunnels opened, want MaxConnections = 15", total, kas.count())
	}
}

// A tunnel above MinIdle that stays idle for MaxIdleTime is withdrawn (half-closed, then ended by kas,
// and its goroutine ends); MinIdle tunnels stay, however long they are idle.
func TestIdleTunnelsAboveMinIdleAreWithdrawnAfterMaxIdleTime(t *testing.T) {
	const maxIdle = 42 * time.Second
	clock := &fakeIdleClock{}
	kas := &fakeKasConn{}
	a := startPoolAgent(t, kas, Config{MinIdle: 2, MaxIdleTime: maxIdle, afterFunc: clock.afterFunc})
	waitSettled(t, a, Stats{Idle: 2}, 2)
	// Two calls open two more tunnels; when the calls are over, their tunnels reconnect: four idle.
	first := kas.all()
	for _, s := range first {
		if n := callOpens(t, a, s); n != 1 {
			t.Fatalf("a call opened %d tunnels, want 1", n)
		}
	}
	waitSettled(t, a, Stats{Idle: 2, Busy: 2}, 4)
	for _, s := range first {
		finishCall(t, s)
	}
	waitFor(t, "four idle tunnels", func() bool { return a.Stats() == Stats{Idle: 4} && kas.count() == 6 })

	armed := clock.armed()
	if len(armed) != 4 {
		t.Fatalf("%d idle timers armed, want one per idle tunnel (4)", len(armed))
	}
	for _, d := range armed {
		if d != maxIdle {
			t.Fatalf("idle timer of %v, want MaxIdleTime %v", d, maxIdle)
		}
	}
	if n := kas.halfClosed(); n != 2 { // the two that served a call
		t.Fatalf("%d tunnels half-closed before MaxIdleTime passed, want 2", n)
	}

	// MaxIdleTime passes: the two above MinIdle are withdrawn, the other two stay.
	if n := clock.fire(); n != 4 {
		t.Fatalf("%d timers fired, want 4", n)
	}
	if n := kas.halfClosed(); n != 4 {
		t.Fatalf("%d tunnels half-closed, want 2 withdrawn besides the 2 that served a call", n)
	}
	waitSettled(t, a, Stats{Idle: 2}, 2)
	// MaxIdleTime passes again: MinIdle tunnels are never withdrawn.
	if n := clock.fire(); n != 2 {
		t.Fatalf("%d timers fired, want the 2 of the remaining idle tunnels", n)
	}
	if n := kas.halfClosed(); n != 4 {
		t.Fatalf("%d tunnels half-closed: a MinIdle tunnel was withdrawn", n)
	}
	if st := a.Stats(); st != (Stats{Idle: 2}) || kas.count() != 6 || len(kas.idle()) != 2 {
		t.Fatalf("after the second MaxIdleTime: %+v, %d tunnels opened, %d idle at kas", st, kas.count(), len(kas.idle()))
	}
}

// kas may pick a tunnel for a call just as the agent withdraws it: the agent does not serve that call
// (kas gives it to another tunnel) and its goroutine ends when kas ends the stream.
func TestWithdrawnTunnelDoesNotServeACallKasSentLate(t *testing.T) {
	clock := &fakeIdleClock{}
	kas := &fakeKasConn{keepHalfClosed: true}
	a := startPoolAgent(t, kas, Config{MinIdle: 1, afterFunc: clock.afterFunc})
	waitSettled(t, a, Stats{Idle: 1}, 1)
	s0 := kas.all()[0]
	callOpens(t, a, s0)
	finishCall(t, s0)
	s0.end(nil, "")
	waitFor(t, "two idle tunnels", func() bool { return a.Stats() == Stats{Idle: 2} && len(kas.idle()) == 2 })

	clock.fire()
	var withdrawn *fakeKasStream
	for _, s := range kas.all()[1:] {
		if s.isHalfClosed() {
			withdrawn = s
		}
	}
	if withdrawn == nil || kas.halfClosed() != 2 {
		t.Fatalf("%d tunnels half-closed, want s0 and one withdrawn", kas.halfClosed())
	}
	withdrawn.deliver(t, requestInfo)
	withdrawn.deliver(t, &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: []byte("x")}}})
	withdrawn.end(nil, "")
	waitSettled(t, a, Stats{Idle: 1}, 1)
	if sent := withdrawn.messages(); len(sent) != 1 {
		t.Fatalf("withdrawn tunnel sent %v, want only its descriptor", sent)
	}
	if a.Stats().Busy != 0 || kas.count() != 3 {
		t.Fatalf("%+v, %d tunnels opened: the late call was served or the tunnel reconnected", a.Stats(), kas.count())
	}
}

// An end that says nothing about the agent's connection reconnects at once: the agent backs off for an
// hour otherwise.
func TestTunnelEndReconnectsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		reason string
	}{
		{"clean EOF", nil, ""},
		{"call-ended with an error status", status.Error(codes.ResourceExhausted, "the call's request info is too large"), rpc.EndReasonCallEnded},
		{"call-ended with OK", nil, rpc.EndReasonCallEnded},
		{"max connection age", nil, rpc.EndReasonMaxAge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kas := &fakeKasConn{}
			a := startPoolAgent(t, kas, Config{MinIdle: 1})
			waitSettled(t, a, Stats{Idle: 1}, 1)
			kas.all()[0].end(tc.err, tc.reason)
			waitFor(t, "a new tunnel", func() bool { return kas.count() == 2 && len(kas.idle()) == 1 })
			waitSettled(t, a, Stats{Idle: 1}, 1)
			if sent := kas.all()[1].messages(); len(sent) != 1 || sent[0].GetDescriptor_() == nil {
				t.Fatalf("the new tunnel sent %v, want its descriptor", sent)
			}
		})
	}
}

// A real error backs off: with an hour of backoff, the tunnel does not come back while its sibling
// reconnects three times, and Stop ends the wait.
func TestTunnelErrorBacksOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(t *testing.T, s *fakeKasStream)
	}{
		{"Unavailable", func(_ *testing.T, s *fakeKasStream) {
			s.end(status.Error(codes.Unavailable, "connection reset"), "")
		}},
		{"an error with an unknown reason", func(_ *testing.T, s *fakeKasStream) {
			s.end(status.Error(codes.Internal, "oops"), "no-such-reason")
		}},
		{"kas breaks the protocol", func(t *testing.T, s *fakeKasStream) {
			s.deliver(t, &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CloseSend{CloseSend: &rpc.CloseSend{}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kas := &fakeKasConn{}
			a := startPoolAgent(t, kas, Config{MinIdle: 2})
			waitSettled(t, a, Stats{Idle: 2}, 2)
			streams := kas.all()
			tc.fail(t, streams[0])
			waitSettled(t, a, Stats{Connecting: 1, Idle: 1}, 2)
			cycleClean(t, a, kas, streams[1], 3)
			if n := kas.count(); n != 5 {
				t.Fatalf("%d tunnels opened, want 2 + the sibling's 3 reconnects: the failed tunnel did not back off", n)
			}
			if st := a.Stats(); st != (Stats{Connecting: 1, Idle: 1}) {
				t.Fatalf("%+v, want the failed tunnel still backing off", st)
			}
			waitClosed(t, "Stop to end the backoff", stopAsync(a, context.Background()))
			if n, _ := poolCounts(a); n != 0 || kas.count() != 5 {
				t.Fatalf("after Stop: %d goroutines, %d tunnels opened", n, kas.count())
			}
		})
	}
}

// A tunnel that kas ended for shutdown reconnects after the jittered delay: never before the moment the
// pool drew.
func TestShutdownReasonReconnectsAfterTheJitteredDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"OK", nil},
		{"Unavailable", status.Error(codes.Unavailable, "kas is shutting down")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kas := &fakeKasConn{}
			a := startPoolAgent(t, kas, Config{MinIdle: 1, ShutdownReconnectJitter: 20 * time.Millisecond})
			waitSettled(t, a, Stats{Idle: 1}, 1)
			ended := time.Now()
			kas.all()[0].end(tc.err, rpc.EndReasonShutdown)
			waitFor(t, "the tunnel to reconnect after the jittered delay", func() bool { return kas.count() == 2 && len(kas.idle()) == 1 })
			a.pool.mu.Lock()
			at := a.pool.reconnectAt
			a.pool.mu.Unlock()
			if at.Before(ended) {
				t.Fatalf("reconnect time %v drawn before the shutdown at %v", at, ended)
			}
			if opened := kas.all()[1].opened; opened.Before(at) {
				t.Fatalf("reconnected %v before the drawn time", at.Sub(opened))
			}
		})
	}
}

// The shutdown delay is drawn once per agent and shutdown: a tunnel ended by the same shutdown waits for
// the time already drawn (here an hour) instead of drawing its own.
func TestShutdownDelayIsSharedByTheAgentsTunnels(t *testing.T) {
	kas := &fakeKasConn{}
	a := startPoolAgent(t, kas, Config{MinIdle: 2, ShutdownReconnectJitter: 20 * time.Millisecond})
	waitSettled(t, a, Stats{Idle: 2}, 2)
	drawn := time.Now().Add(time.Hour)
	a.pool.mu.Lock()
	a.pool.reconnectAt = drawn // another tunnel of this agent ended by the shutdown drew an hour
	a.pool.mu.Unlock()
	streams := kas.all()
	streams[0].end(nil, rpc.EndReasonShutdown)
	waitSettled(t, a, Stats{Connecting: 1, Idle: 1}, 2)
	cycleClean(t, a, kas, streams[1], 3)
	a.pool.mu.Lock()
	at := a.pool.reconnectAt
	a.pool.mu.Unlock()
	if n := kas.count(); n != 5 || !at.Equal(drawn) {
		t.Fatalf("%d tunnels opened (want 5), reconnect time moved by %v: the tunnel drew its own delay", n, at.Sub(drawn))
	}
	waitClosed(t, "Stop to end the shutdown delay", stopAsync(a, context.Background()))
}

// Stop withdraws idle tunnels and returns only once kas ended them and every pool goroutine ended.
func TestStopWithdrawsIdleTunnelsAndWaitsForEveryGoroutine(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	kas := &fakeKasConn{keepHalfClosed: true}
	a := startPoolAgent(t, kas, Config{MinIdle: 3})
	waitSettled(t, a, Stats{Idle: 3}, 3)
	stopped := stopAsync(a, context.Background())
	waitFor(t, "Stop to withdraw every idle tunnel", func() bool { return kas.halfClosed() == 3 })
	for i, s := range kas.all() {
		if s.ctx.Err() != nil {
			t.Fatalf("tunnel %d cancelled: Stop must withdraw an idle tunnel and let kas end it", i)
		}
		if sent := s.messages(); len(sent) != 1 {
			t.Fatalf("withdrawn tunnel %d sent %v, want only its descriptor", i, sent)
		}
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned before kas ended the withdrawn tunnels")
	default:
	}
	for _, s := range kas.all() {
		s.end(nil, "")
	}
	waitClosed(t, "Stop to return", stopped)
	if n, _ := poolCounts(a); n != 0 || a.Stats() != (Stats{}) || kas.count() != 3 {
		t.Fatalf("after Stop: %d goroutines, %+v, %d tunnels opened", n, a.Stats(), kas.count())
	}
	goleak.VerifyNone(t, leaks)
}

// A call in flight when Stop begins runs to its end; then Stop returns, and its tunnel does not
// reconnect.
func TestStopLetsACallInFlightFinish(t *testing.T) {
	kas := &fakeKasConn{}
	a := startPoolAgent(t, kas, Config{MinIdle: 2})
	waitSettled(t, a, Stats{Idle: 2}, 2)
	busy := kas.all()[0]
	callOpens(t, a, busy)
	waitSettled(t, a, Stats{Idle: 2, Busy: 1}, 3)
	stopped := stopAsync(a, context.Background())
	waitFor(t, "the idle tunnels to be withdrawn", func() bool {
		n, _ := poolCounts(a)
		return n == 1 && kas.halfClosed() == 2
	})
	if busy.isHalfClosed() || busy.ctx.Err() != nil {
		t.Fatal("Stop withdrew or cancelled the busy tunnel")
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while a call was in flight")
	default:
	}
	finishCall(t, busy)
	waitClosed(t, "Stop to return after the call", stopped)
	if n, _ := poolCounts(a); n != 0 || kas.count() != 3 {
		t.Fatalf("after Stop: %d goroutines, %d tunnels opened, want 0 and 3", n, kas.count())
	}
}

// When Stop's ctx ends before a call in flight, the call is cancelled and Stop returns.
func TestStopCancelsACallInFlightWhenItsContextEnds(t *testing.T) {
	kas := &fakeKasConn{}
	a := startPoolAgent(t, kas, Config{MinIdle: 1})
	waitSettled(t, a, Stats{Idle: 1}, 1)
	busy := kas.all()[0]
	callOpens(t, a, busy)
	waitSettled(t, a, Stats{Idle: 1, Busy: 1}, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := stopAsync(a, ctx)
	waitFor(t, "the idle tunnel to be withdrawn", func() bool {
		n, _ := poolCounts(a)
		return n == 1
	})
	select {
	case <-stopped:
		t.Fatal("Stop returned while a call was in flight")
	default:
	}
	if busy.ctx.Err() != nil {
		t.Fatal("the call was cancelled before Stop's ctx ended")
	}
	cancel()
	waitClosed(t, "Stop to return after its ctx ended", stopped)
	if busy.ctx.Err() != context.Canceled {
		t.Fatalf("busy tunnel: %v, want it cancelled", busy.ctx.Err())
	}
	if sent := busy.messages(); len(sent) != 1 {
		t.Fatalf("the cancelled call sent %v, want no answer", sent)
	}
	if n, _ := poolCounts(a); n != 0 || kas.count() != 2 {
		t.Fatalf("after Stop: %d goroutines, %d tunnels opened, want 0 and 2", n, kas.count())
	}
}

// A tunnel that kas accepted (here: it sent a message) resets the backoff: its failure waits the
// initial backoff again, not the grown one (1000 s here).
func TestBackoffResetsAfterAcceptedTunnel(t *testing.T) {
	kas := &fakeKasConn{}
	a := startPoolAgent(t, kas, Config{MinIdle: 1, Backoff: reconnect.Backoff{Initial: time.Millisecond, Max: time.Hour, Factor: 1e6}})
	waitSettled(t, a, Stats{Idle: 1}, 1)
	kas.all()[0].end(status.Error(codes.Unavailable, "connection reset"), "")
	waitFor(t, "the reconnect after the initial backoff", func() bool { return len(kas.idle()) == 1 && kas.count() == 2 })
	// kas answers, then breaks the protocol: the agent was connected, the failure is a new one.
	kas.all()[1].deliver(t, &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CloseSend{CloseSend: &rpc.CloseSend{}}})
	waitFor(t, "the reconnect after the reset backoff", func() bool { return len(kas.idle()) == 1 && kas.count() == 3 })
}
