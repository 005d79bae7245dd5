package load

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestClosedLoopCountsErrorsByCode: every call is counted under its code, none is dropped.
func TestClosedLoopCountsErrorsByCode(t *testing.T) {
	outcomes := []error{
		nil,
		nil,
		status.Error(codes.Unavailable, "no tunnel"),
		status.Error(codes.DeadlineExceeded, "too slow"),
		errors.New("not a status"), // counts as Unknown
	}
	var n atomic.Int64
	newCall := func() Call {
		return func(context.Context) (int, error) {
			return 2, outcomes[(n.Add(1)-1)%int64(len(outcomes))]
		}
	}
	const calls = 1000
	gen := ClosedLoop{Workers: 4, Duration: 20 * time.Second, MaxCalls: calls}
	res, err := gen.Run(testContext(t, 30*time.Second), newCall)
	if err != nil {
		t.Fatal(err)
	}
	// The calls return 2 bytes whether they fail or not: only the 400 successful ones count.
	if res.Calls != calls || res.Latency.TotalCount() != calls || res.Bytes != 2*400 || res.OK() != 400 {
		t.Fatalf("calls %d, histogram %d, bytes %d, ok %d; want %d calls, 800 bytes", res.Calls, res.Latency.TotalCount(), res.Bytes, res.OK(), calls)
	}
	want := map[codes.Code]int64{codes.OK: 400, codes.Unavailable: 200, codes.DeadlineExceeded: 200, codes.Unknown: 200}
	for c, w := range want {
		if res.ByCode[c] != w {
			t.Errorf("%v: %d calls, want %d (all: %v)", c, res.ByCode[c], w, res.ByCode)
		}
	}
	if len(res.ByCode) != len(want) {
		t.Errorf("codes %v, want %v", res.ByCode, want)
	}
	if res.Errors != 600 {
		t.Errorf("%d errors, want 600", res.Errors)
	}
}

// TestClosedLoopKeepsCallsThatEndLate: a call still running when the duration ends is recorded.
func TestClosedLoopKeepsCallsThatEndLate(t *testing.T) {
	newCall := func() Call {
		return func(context.Context) (int, error) {
			time.Sleep(80 * time.Millisecond)
			return 0, status.Error(codes.Internal, "late and failed")
		}
	}
	res, err := ClosedLoop{Workers: 2, Duration: 50 * time.Millisecond}.Run(testContext(t, 30*time.Second), newCall)
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != 2 || res.Errors != 2 || res.ByCode[codes.Internal] != 2 {
		t.Errorf("calls %d errors %d by code %v, want both calls recorded as Internal", res.Calls, res.Errors, res.ByCode)
	}
	if res.Offered != 0 || res.Missed != 0 {
		t.Errorf("a closed loop offers no rate and misses nothing: offered %v missed %d", res.Offered, res.Missed)
	}
}

// TestFailedCallsAreNoThroughput: calls that fail at once, each claiming a 1 MiB payload (as a refused
// unary echo does), are all counted as errors and give zero calls/s and zero bytes/s.
func TestFailedCallsAreNoThroughput(t *testing.T) {
	newCall := func() Call {
		return func(context.Context) (int, error) {
			return 2 << 20, status.Error(codes.Unavailable, "connection refused")
		}
	}
	res, err := ClosedLoop{Workers: 2, Duration: time.Second, MaxCalls: 500}.Run(testContext(t, 30*time.Second), newCall)
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != 500 || res.Errors != 500 || res.ByCode[codes.Unavailable] != 500 {
		t.Fatalf("calls %d errors %d by code %v, want 500 Unavailable", res.Calls, res.Errors, res.ByCode)
	}
	if res.Bytes != 0 || res.CallsPerSecond() != 0 || res.BytesPerSecond() != 0 {
		t.Errorf("bytes %d, calls/s %v, bytes/s %v; want all zero", res.Bytes, res.CallsPerSecond(), res.BytesPerSecond())
	}
}
