package runner

import (
	"slices"
	"testing"
)

// secs builds a timeline from (offered, achieved, offered and failed) triples.
func secs(counts ...[3]int64) []Second {
	tl := make([]Second, len(counts))
	for i, c := range counts {
		tl[i] = Second{T: i, Offered: c[0], Achieved: c[1], OK: c[1], OfferedFailed: c[2]}
	}
	return tl
}

// steady is n seconds in which every call offered succeeded.
func steady(n int, rate int64) [][3]int64 {
	out := make([][3]int64, n)
	for i := range out {
		out[i] = [3]int64{rate, rate, 0}
	}
	return out
}

func TestCaughtUp(t *testing.T) {
	for _, tc := range []struct {
		offered, achieved, failed int64
		want                      bool
	}{
		{50, 50, 0, true},
		{50, 46, 0, true},   // 45 is 90%, and one call of slack
		{50, 44, 0, true},   // 44 + 1 >= 45
		{50, 43, 0, false},  // a backlog, not jitter
		{50, 60, 0, true},   // a backlog draining
		{50, 50, 1, false},  // a call offered in it failed
		{0, 0, 0, true},     // after the load: nothing was asked
		{2, 1, 0, true},     // one call crossing the second's edge
		{3, 1, 0, false},    // at low rates the slack is one call, not a share
		{50, 17, 0, false},  // the run: 11 to 25 of 50 offered
		{300, 270, 0, true}, // exactly 90%
	} {
		if got := caughtUp(Second{Offered: tc.offered, Achieved: tc.achieved, OfferedFailed: tc.failed}); got != tc.want {
			t.Errorf("offered %d, achieved %d, offered and failed %d: caught up %v, want %v", tc.offered, tc.achieved, tc.failed, got, tc.want)
		}
	}
}

func TestRecoveryAfter(t *testing.T) {
	// 10 steady seconds, then a fault from 10 s: seconds 10 and 11 fall behind, 12 fails calls, 13 on
	// catch up.
	tl := secs(append(append(steady(10, 50), [3]int64{50, 20, 0}, [3]int64{50, 30, 0}, [3]int64{50, 60, 3}), steady(7, 50)...)...)
	for _, tc := range []struct {
		name        string
		from, until float64
		want        float64
		ok          bool
	}{
		{"from the middle of the bad seconds", 10.002, 20, 2.998, true},
		{"from a second that caught up", 13.5, 20, 0, true},
		{"from the start of a caught-up second", 13, 20, 0, true},
		{"span ends before catching up", 10.002, 12, 0, false},
		{"span of one bad second", 12.2, 12.5, 0, false},
		{"span of one good second", 15.2, 15.5, 0, true},
		{"before the timeline", -1, 5, 0, false},
		{"past the timeline", 25, 30, 0, false},
	} {
		got, ok := recoveryAfter(tl, tc.from, tc.until)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: recovery after %v until %v = %v, %v; want %v, %v", tc.name, tc.from, tc.until, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRecoveryNeverCaughtUp is the run: 200 ms of latency on the agent link for the rest of
// the load, 50 calls/s offered, 11 to 25 achieved, no call failed. It used to report recovery 0 s.
func TestRecoveryNeverCaughtUp(t *testing.T) {
	counts := steady(3, 50)
	for _, a := range []int64{15, 17, 18, 16, 11, 25, 17, 20, 19, 12, 14, 17} {
		counts = append(counts, [3]int64{50, a, 0})
	}
	tl := secs(counts...)
	// The fault lasted to the end of the load, so it was removed after it (at 15.4 s) and its recovery
	// counts from when it was in place.
	windows := []FaultWindow{{Name: "3s agent->kas latency (all)", StartS: 3.001, EndS: 15.4, RecoveryFromS: 3.002}}
	r, notRecovered := recoveries(tl, windows, 15)
	if r != nil || !slices.Equal(notRecovered, []string{"3s agent->kas latency (all)"}) || windows[0].RecoveryS != nil {
		t.Fatalf("recovery %v, not recovered %v, window %+v; want not recovered", r, notRecovered, windows[0])
	}

	// The same fault on a load that kept up (only the second it struck in fell behind) recovered at
	// once.
	tl = secs(append(append(steady(3, 50), [3]int64{50, 28, 0}), steady(11, 50)...)...)
	r, notRecovered = recoveries(tl, windows, 15)
	if r == nil || *r != 0.998 || len(notRecovered) != 0 || windows[0].RecoveryS == nil || *windows[0].RecoveryS != 0.998 {
		t.Fatalf("recovery %v, not recovered %v, window %+v; want 0.998 s", r, notRecovered, windows[0])
	}
}

// TestRecoveriesSpans: each fault's span ends where the next starts, a window not known yet still
// ends the spans before it, and the longest recovery is the run's.
func TestRecoveriesSpans(t *testing.T) {
	counts := steady(40, 100)
	for _, i := range []int{10, 11, 12, 25} { // behind after the first fault ends (at 10 s), and after the second (at 25 s)
		counts[i] = [3]int64{100, 40, 0}
	}
	counts[28] = [3]int64{100, 100, 2} // and failures while the third fault is on
	tl := secs(counts...)
	windows := []FaultWindow{
		{Name: "a", StartS: 5, EndS: 10, RecoveryFromS: 10},
		{Name: "b", StartS: 20, EndS: 25, RecoveryFromS: 25},
		{Name: "c", StartS: 27, EndS: 30, RecoveryFromS: -1}, // still on: not known yet
	}
	r, notRecovered := recoveries(tl, windows, 40)
	if r == nil || *r != 3 || len(notRecovered) != 0 {
		t.Fatalf("longest %v, not recovered %v; want 3 s (a), b ending before c", r, notRecovered)
	}
	if windows[0].RecoveryS == nil || *windows[0].RecoveryS != 3 || windows[1].RecoveryS == nil || *windows[1].RecoveryS != 1 || windows[2].RecoveryS != nil {
		t.Fatalf("windows %+v", windows)
	}
	// Once c is known, its failures make it not recovered: the run has no recovery figure.
	windows[2].RecoveryFromS = 28.5
	r, notRecovered = recoveries(tl, windows, 29)
	if r != nil || !slices.Equal(notRecovered, []string{"c"}) {
		t.Fatalf("longest %v, not recovered %v; want c not recovered", r, notRecovered)
	}
	if r, notRecovered := recoveries(tl, nil, 40); r != nil || notRecovered != nil {
		t.Fatalf("no faults: %v, %v", r, notRecovered)
	}
}
