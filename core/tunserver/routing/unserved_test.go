package routing

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
)

// findTimeout is long next to the unserved grace (presence.DefaultUnservedGrace), so that a find that
// ends early says so.
const findTimeout = 30 * time.Second

func wantUnimplemented(t *testing.T, err error, contains string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), contains) {
		t.Fatalf("find: %v, want Unimplemented saying %q", err, contains)
	}
}

func TestFinderAloneUnservedFailsAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t)
		f.source.setPresence(presence.MethodUnserved)
		start := time.Now()
		_, err := f.FindGateway(t.Context(), findRequest(findTimeout))
		wantUnimplemented(t, err, "agent 42 is connected but does not serve "+testMethod)
		if d := time.Since(start); d >= findTimeout {
			t.Fatalf("waited %s", d)
		}
		if !isClosed(f.handle.done) {
			t.Fatal("the local wait was not withdrawn")
		}
	})
}

func TestFinderAloneGraceDisabledWaitsFindTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t)
		f.cfg.UnservedGrace = -1
		f.source.setPresence(presence.MethodUnserved)
		_, err := f.FindGateway(t.Context(), findRequest(findTimeout))
		wantFindTimeout(t, err)
	})
}

// gatewayUnserved makes a gateway stream answer as a gateway whose tunnels lack the method.
func gatewayUnserved(cs *fakeClientStream) {
	cs.setTrailer(metadata.Pairs(rpc.GatewayUnservedTrailerKey, "1"))
	cs.reply(recvItem{err: status.Error(codes.Unimplemented, "agent 42 is connected but does not serve "+testMethod+": said the gateway")})
}

func TestFinderRemoteUnservedAndAbsentHereFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, peerURL)
		res := f.findAsync(t.Context(), findTimeout)
		cs := waitFor(t, f.dialer.streams, "a gateway stream")
		cs.reply(noTunnel)
		pending(t, res)
		gatewayUnserved(cs)
		r := waitFor(t, res, "the find")
		wantUnimplemented(t, r.err, "said the gateway")
		if f.backingOff(peerURL) {
			t.Fatal("a gateway that answered for its tunnels is backed off as if it failed")
		}
	})
}

func TestFinderLocalUnservedWaitsForListedGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, peerURL)
		f.source.setPresence(presence.MethodUnserved)
		res := f.findAsync(t.Context(), findTimeout)
		cs := waitFor(t, f.dialer.streams, "a gateway stream")
		cs.reply(noTunnel)
		// The gateway may still serve the method (a busy tunnel, a new agent version): no verdict yet.
		time.Sleep(5 * time.Second)
		pending(t, res)
		gatewayUnserved(cs)
		r := waitFor(t, res, "the find")
		wantUnimplemented(t, r.err, "connected to 2 kas")
		if d := f.dialer.dialed(peerURL); d != 1 {
			t.Fatalf("the gateway was asked %d times", d)
		}
	})
}

func TestFinderLocalUnservedTrackerListsOnlySelf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, []string{}...)
		f.source.setPresence(presence.MethodUnserved)
		start := time.Now()
		_, err := f.FindGateway(t.Context(), findRequest(findTimeout))
		wantUnimplemented(t, err, "agent 42 is connected but does not serve")
		if d := time.Since(start); d < presence.DefaultUnservedGrace || d >= findTimeout {
			t.Fatalf("failed after %s", d)
		}
	})
}

func TestFinderAbsentEverywhereWaitsFindTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newTestFinder(t, []string{}...)
		start := time.Now()
		_, err := f.FindGateway(t.Context(), findRequest(findTimeout))
		wantFindTimeout(t, err)
		if d := time.Since(start); d != findTimeout {
			t.Fatalf("gave up after %s", d)
		}
	})
}
