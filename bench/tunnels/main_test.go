package tunnels

import (
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

// skipRacyPeer skips the checks of an adapter whose library has data races of its own under -race:
// remotedialer writes its connections' error and deadlines without a lock (connection.go), so a
// connection that closes while the other side writes is a race report, whatever the adapter does. Its
// checks run without -race (make test-short; go test -run TestAdaptersUnderLoad ./bench/tunnels).
func skipRacyPeer(t *testing.T, name string) {
	t.Helper()
	if raceDetector && name == Remotedialer {
		t.Skip("remotedialer has data races of its own (connection.go: err and deadlines without a lock); checked without -race")
	}
}

// verifyNoLeaks fails t when a goroutine other than the known peer leaks is left.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	goleak.VerifyNone(t, knownPeerLeaks...)
}
