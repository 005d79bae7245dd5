package routing

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunserver/directory"
)

// The finder tests run in synctest bubbles: time is fake, so find timeouts and backoffs pass exactly and
// at once, and synctest.Wait tells when every attempt has done all it can.

const (
	selfURL = "grpc://self"
	peerURL = "grpc://b"
)

// testFinder is a Finder over fakes: this kas's tunnels, the in-memory tracker and a dialer of fake kas.
type testFinder struct {
	*Finder
	source  *fakeSource
	handle  *fakeHandle
	tracker *tracker.Memory // nil: no tracker
	dialer  *fakeDialer
}

// newTestFinder returns a finder whose tracker lists this kas and peers for the test agent; without
// peers (nil), it has no tracker at all.
func newTestFinder(t *testing.T, peers ...string) *testFinder {
	h := newHandle()
	f := &testFinder{source: &fakeSource{handle: h}, handle: h, dialer: newDialer()}
	cfg := FinderConfig{
		Registry: f.source, SelfURL: selfURL, Dialer: f.dialer,
		Stagger:    time.Millisecond,
		BackoffMin: time.Second, BackoffMax: 4 * time.Second,
	}
	if peers != nil {
		f.tracker = tracker.NewMemory(0)
		for _, u := range append([]string{selfURL}, peers...) {
			_ = f.tracker.Register(context.Background(), u, testAgentID)
		}
		dir, err := directory.New(directory.Config{Tracker: f.tracker, PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(dir.Close)
		cfg.Directory = dir
	}
	f.Finder = NewFinder(cfg)
	return f
}

// findRequest is a find for the test agent, with the caller's credentials among its metadata.
func findRequest(timeout time.Duration) FindRequest {
	return FindRequest{
		AgentID: testAgentID, FullMethod: testMethod, Service: "test.Svc", Method: "M",
		Metadata:    metadata.Pairs("authorization", "Bearer caller-secret", "x-custom", "v"),
		FindTimeout: timeout,
	}
}

type findResult struct {
	gw  Gateway
	err error
}

// findAsync finds in the background.
func (f *testFinder) findAsync(ctx context.Context, timeout time.Duration) <-chan findResult {
	ch := make(chan findResult, 1)
	go func() {
		gw, err := f.FindGateway(ctx, findRequest(timeout))
		ch <- findResult{gw, err}
	}()
	return ch
}

// pending fails the test if the find is over.
func pending(t *testing.T, res <-chan findResult) {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-res:
		t.Fatalf("the find ended early: %v, %v", r.gw, r.err)
	default:
	}
}

func wantFindTimeout(t *testing.T, err error) {
	t.Helper()
	var te *findTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("find: %v, want the find timeout", err)
	}
}

func TestFinderLocalTunnelAtOnceWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, peerURL)
		f.source.found = true
		close(f.handle.ready)
		gw, err := f.FindGateway(t.Context(), findRequest(time.Second))
		if err != nil || gw.URL() != "" {
			t.Fatalf("find: %v, %v; want this kas's tunnel", gw, err)
		}
		synctest.Wait()
		if n := f.dialer.totalDials(); n != 0 {
			t.Fatalf("%d remote attempts for a call with a local tunnel", n)
		}
		if isClosed(f.handle.done) {
			t.Fatal("the tunnel was given back before the call used it")
		}
		gw.Release()
		if !isClosed(f.handle.done) {
			t.Fatal("Release did not give the tunnel back")
		}
	})
}

func TestFinderWithoutTrackerTimesOutOnLocalHandle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t)
		start := time.Now()
		_, err := f.FindGateway(t.Context(), findRequest(time.Second))
		wantFindTimeout(t, err)
		if waited := time.Since(start); waited < time.Second {
			t.Fatalf("gave up after %s, before the find timeout", waited)
		}
		if !isClosed(f.handle.done) {
			t.Fatal("the local wait was not withdrawn")
		}
	})
}

func TestFinderRemoteGatewayWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, peerURL)
		res := f.findAsync(t.Context(), 10*time.Second)
		cs := waitFor(t, f.dialer.streams, "a gateway stream")
		if cs.url != peerURL || cs.method != testMethod {
			t.Fatalf("stream to %s for %s, want %s for %s", cs.url, cs.method, peerURL, testMethod)
		}
		cs.reply(noTunnel)
		pending(t, res)
		cs.reply(tunnelReady)
		r := waitFor(t, res, "the find")
		if r.err != nil || r.gw.URL() != peerURL {
			t.Fatalf("find: %v, %v; want the gateway %s", r.gw, r.err, peerURL)
		}
		if got := cs.sent.String(); got != "start_streaming" {
			t.Fatalf("winning gateway got %q, want start_streaming", got)
		}
		synctest.Wait()
		if !isClosed(f.handle.done) || cs.cancelled() {
			t.Fatalf("local wait withdrawn %t, winning stream cancelled %t; want true, false", isClosed(f.handle.done), cs.cancelled())
		}
		if n := f.dialer.dialed(selfURL); n != 0 {
			t.Fatalf("this kas dialed itself %d times", n)
		}
		md, _ := metadata.FromOutgoingContext(cs.ctx)
		if len(md.Get("authorization")) != 0 || len(md.Get("x-custom")) != 1 {
			t.Fatalf("gateway metadata %v: want the caller's without its credentials", md)
		}
		r.gw.Release()
		if !cs.cancelled() {
			t.Fatal("Release did not end the gateway stream")
		}
	})
}

func TestFinderLocalTunnelBeatsWaitingRemote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, peerURL)
		res := f.findAsync(t.Context(), 10*time.Second)
		cs := waitFor(t, f.dialer.streams, "a gateway stream")
		cs.reply(noTunnel)
		pending(t, res)
		close(f.handle.ready)
		r := waitFor(t, res, "the find")
		if r.err != nil || r.gw.URL() != "" {
			t.Fatalf("find: %v, %v; want this kas's tunnel", r.gw, r.err)
		}
		synctest.Wait()
		if !cs.cancelled() || isClosed(cs.started) {
			t.Fatalf("losing gateway stream cancelled %t, started %t; want true, false", cs.cancelled(), isClosed(cs.started))
		}
		r.gw.Release()
		if !isClosed(f.handle.done) {
			t.Fatal("Release did not give the tunnel back")
		}
	})
}

// This kas's tunnel and a remote one become ready together: one wins, and the other is given back (the
// local wait withdrawn or its tunnel returned, the remote stream cancelled), whichever wins.
func TestFinderRaceLocalAndRemoteReadyTogether(t *testing.T) {
	wins := map[string]int{}
	for range 40 {
		synctest.Test(t, func(t *testing.T) {
			f := newTestFinder(t, peerURL)
			res := f.findAsync(t.Context(), 10*time.Second)
			cs := waitFor(t, f.dialer.streams, "a gateway stream")
			synctest.Wait() // both wait: this kas for a tunnel, the attempt for the gateway's answer
			cs.reply(tunnelReady)
			close(f.handle.ready)
			r := waitFor(t, res, "the find")
			if r.err != nil {
				t.Fatal(r.err)
			}
			synctest.Wait()
			local, remote := isClosed(f.handle.done), cs.cancelled()
			switch r.gw.URL() {
			case "":
				if local || !remote {
					t.Fatalf("this kas won: its tunnel given back %t, remote stream cancelled %t; want false, true", local, remote)
				}
			case peerURL:
				if !local || remote {
					t.Fatalf("the remote won: local tunnel given back %t, remote stream cancelled %t; want true, false", local, remote)
				}
			}
			wins[r.gw.URL()]++
			r.gw.Release()
			if !isClosed(f.handle.done) || !cs.cancelled() {
				t.Fatal("after Release a tunnel is still held")
			}
		})
	}
	t.Logf("wins: %v", wins)
}

func TestFinderCallerCancelled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		peers []string
	}{
		{name: "no tracker"},
		{name: "tracker", peers: []string{peerURL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newTestFinder(t, tc.peers...)
				ctx, cancel := context.WithCancel(t.Context())
				res := f.findAsync(ctx, 10*time.Second)
				var cs *fakeClientStream
				if tc.peers != nil {
					cs = waitFor(t, f.dialer.streams, "a gateway stream")
					cs.reply(noTunnel)
				}
				pending(t, res)
				cancel()
				r := waitFor(t, res, "the find")
				if status.Code(r.err) != codes.Canceled {
					t.Fatalf("find: %v, want the caller's Canceled status", r.err)
				}
				synctest.Wait()
				if !isClosed(f.handle.done) || (cs != nil && !cs.cancelled()) {
					t.Fatal("a cancelled find still holds a wait")
				}
			})
		})
	}
}

// A gateway that fails is not tried again for BackoffMin, and the pause doubles while it keeps failing.
func TestFinderBacksOffFailingGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, peerURL) // BackoffMin 1s, BackoffMax 4s, a tracker poll every 10ms
		f.dialer.answer(peerURL, gatewayEOF)
		start := time.Now()
		find := func(timeout time.Duration, wantDials int) {
			t.Helper()
			_, err := f.FindGateway(t.Context(), findRequest(timeout))
			wantFindTimeout(t, err)
			if n := f.dialer.dialed(peerURL); n != wantDials {
				t.Fatalf("at %s: gateway dialed %d times, want %d", time.Since(start), n, wantDials)
			}
		}
		find(500*time.Millisecond, 1) // fails at 0s: backing off until 1s
		find(400*time.Millisecond, 1) // 0.5s to 0.9s
		time.Sleep(time.Second)
		find(100*time.Millisecond, 2) // 1.9s: tried again, fails: backing off for 2s
		time.Sleep(time.Second)
		find(100*time.Millisecond, 2) // 3s
		time.Sleep(time.Second)
		find(100*time.Millisecond, 3) // 4.1s
	})
}

// A gateway that leaves the tracker while its attempt waits is cancelled, and it is no failure: when it
// comes back it is tried again at once.
func TestFinderCancelsGatewayGoneFromTracker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, peerURL)
		res := f.findAsync(t.Context(), 10*time.Second)
		cs := waitFor(t, f.dialer.streams, "a gateway stream")
		cs.reply(noTunnel)
		_ = f.tracker.Unregister(context.Background(), peerURL, testAgentID)
		time.Sleep(50 * time.Millisecond) // a few tracker polls
		if !cs.cancelled() {
			t.Fatal("the attempt on a gateway gone from the tracker goes on")
		}
		pending(t, res)
		_ = f.tracker.Register(context.Background(), peerURL, testAgentID)
		back := time.Now()
		again := waitFor(t, f.dialer.streams, "a new attempt once the gateway is back")
		if d := time.Since(back); d > 100*time.Millisecond { // 10 tracker polls; BackoffMin is 1s
			t.Fatalf("tried again only after %s: the gateway was backed off as if it had failed", d)
		}
		again.reply(tunnelReady)
		r := waitFor(t, res, "the find")
		if r.err != nil || r.gw.URL() != peerURL {
			t.Fatalf("find: %v, %v; want the gateway %s", r.gw, r.err, peerURL)
		}
		r.gw.Release()
	})
}

// A gateway leaves the tracker exactly as its tunnel becomes ready: the find has cancelled that attempt,
// so its stream is dead, and it must not become the call's gateway.
func TestFinderIgnoresAttemptItCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, peerURL)
		f.dialer.holdStart = make(chan struct{})
		res := f.findAsync(t.Context(), 10*time.Second)
		cs := waitFor(t, f.dialer.streams, "a gateway stream")
		cs.reply(tunnelReady)
		synctest.Wait() // the attempt is sending start_streaming
		_ = f.tracker.Unregister(context.Background(), peerURL, testAgentID)
		time.Sleep(50 * time.Millisecond) // a few tracker polls
		if !cs.cancelled() {
			t.Fatal("the attempt on a gateway gone from the tracker goes on")
		}
		close(f.dialer.holdStart) // start_streaming was sent before the cancel
		pending(t, res)
		close(f.handle.ready)
		r := waitFor(t, res, "the find")
		if r.err != nil || r.gw.URL() != "" {
			t.Fatalf("find: %v, %v; want this kas's tunnel", r.gw, r.err)
		}
		r.gw.Release()
	})
}
