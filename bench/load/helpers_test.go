package load

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errIf returns an Internal status error when fail is set.
func errIf(fail bool) error {
	if fail {
		return status.Error(codes.Internal, "failed on purpose")
	}
	return nil
}

// testContext is a context that ends with the test or after d, whichever comes first, so that no
// generator test can hang.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// countAtLeast is how many recorded latencies are at least min.
func countAtLeast(r *Result, min time.Duration) int64 {
	var n int64
	for _, b := range r.Latency.Distribution() {
		if b.From >= min.Microseconds() {
			n += b.Count
		}
	}
	return n
}
