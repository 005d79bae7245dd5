package chaos

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Toxiproxy leaves the goroutines of a connection blocked on a channel for good when a toxic
	// closed the connection while more bytes were queued in front of it: the noop toxic at the head
	// of the chain holds a chunk that nobody will read, and the link's reader waits behind it (see
	// LeakyFunctions). TestLimitDataBusyConnection does that on purpose, and reset-peer can do it
	// too. Nothing outside toxiproxy can unblock those goroutines, so ignore exactly those two.
	var opts []goleak.Option
	for _, f := range LeakyFunctions {
		opts = append(opts, goleak.IgnoreTopFunction(f))
	}
	goleak.VerifyTestMain(m, opts...)
}
