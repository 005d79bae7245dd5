package tunnels

import (
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, knownPeerLeaks...)
}

// knownPeerLeaks are goroutines that a peer's library leaves behind and that no adapter can end:
// remotedialer's agent-side copy of a connection stalled when its session closed (remotedialer.go).
// Only load tests stall it.
var knownPeerLeaks = []goleak.Option{goleak.IgnoreAnyFunction(remotedialerLeak)}

// checkedAdapters are the adapters this test binary checks: every registered one, but under -race not
// remotedialer, whose library writes its connections' error and deadlines without a lock
// (connection.go), so a connection that closes while the other side writes is a race report whatever
// the adapter does. make test checks it in a run of its own without -race (the test-racy-peers target),
// which fails unless its checks ran and passed.
func checkedAdapters() []string {
	if !raceDetector {
		return Names()
	}
	return slices.DeleteFunc(Names(), func(n string) bool { return n == Remotedialer })
}

// verifyNoLeaks fails t when a goroutine other than the known peer leaks is left.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	goleak.VerifyNone(t, knownPeerLeaks...)
}
