package harnessmetrics_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// The observer is what bench and chaos hand their load generators.
var _ load.Observer = harnessmetrics.Observer{}

// TestObserver: a scenario's observer records into that scenario's series, as Offered and Call do.
func TestObserver(t *testing.T) {
	m, p := newMetrics(t)
	o := m.Observer("obs")
	o.Offered(3)
	o.Call(time.Millisecond, codes.OK)
	o.Call(time.Millisecond, codes.Unavailable)

	mfs := testenv.Scrape(t, p)
	if got := series(t, mfs[harnessmetrics.OfferedCallsMetric], "scenario", "obs").GetCounter().GetValue(); got != 3 {
		t.Errorf("offered = %v, want 3", got)
	}
	calls := mfs[harnessmetrics.CallsMetric]
	for _, code := range []string{"OK", "Unavailable"} {
		if got := series(t, calls, "scenario", "obs", "code", code).GetCounter().GetValue(); got != 1 {
			t.Errorf("calls %s = %v, want 1", code, got)
		}
	}
	if got := series(t, mfs[harnessmetrics.CallDurationMetric], "scenario", "obs").GetHistogram().GetSampleCount(); got != 2 {
		t.Errorf("duration count %d, want 2", got)
	}

	// Without metrics the observer records nothing and does not panic.
	var none *harnessmetrics.Metrics
	none.Observer("obs").Offered(1)
	none.Observer("obs").Call(time.Millisecond, codes.OK)
}
