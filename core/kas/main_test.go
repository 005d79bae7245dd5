package kas_test

import (
	"testing"

	"github.com/tunnelbench/tunnelbench/internal/testredis"
)

// TestMain checks for leaked goroutines, giving go-redis's dial probes time to end (see testredis).
func TestMain(m *testing.M) {
	testredis.VerifyTestMain(m)
}
