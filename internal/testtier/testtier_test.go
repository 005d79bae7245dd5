package testtier_test

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a testing.TB that records a skip instead of ending the goroutine.
type recorder struct {
	testing.TB
	skipped string
}

func (r *recorder) Helper()          {}
func (r *recorder) Skip(args ...any) { r.skipped = fmt.Sprint(args...) }

// TestFull: Full skips exactly under -short, with a one-line reason that says how to run the test.
func TestFull(t *testing.T) {
	r := &recorder{}
	testtier.Full(r, "needs redis-server")
	if testing.Short() {
		if r.skipped != "needs redis-server; run make test" {
			t.Errorf("under -short: skip reason %q", r.skipped)
		}
	} else if r.skipped != "" {
		t.Errorf("without -short: skipped with %q", r.skipped)
	}
}
