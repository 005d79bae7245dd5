package kas_test

import (
	"log/slog"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/internal/testredis"
)

// TestMain checks for leaked goroutines, giving go-redis's dial probes time to end (see testredis).
func TestMain(m *testing.M) {
	// Redis outages are on purpose here: keep go-redis's per-dial complaints out of the test output.
	tracker.SetRedisLogger(slog.New(slog.DiscardHandler))
	testredis.VerifyTestMain(m)
}
