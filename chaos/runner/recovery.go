package runner

import "math"

// The recovery rule (stated for scenario authors in chaos/scenario's doc): a second of the timeline
// has caught up when the calls that succeeded in it are at least (1 - RecoveryTolerance) of the calls
// offered in it, less recoveryEdgeCalls, and no call offered in it failed. Recovery from a fault runs
// from its reference time to the start of the first second from which every second caught up, until
// the next fault starts or the load ends.
const (
	// RecoveryTolerance is how far below the offered calls the calls that succeeded in a second may
	// be, as a share of the offered ones: jitter, not a backlog.
	RecoveryTolerance = 0.1
	// recoveryEdgeCalls are the calls a second may lack beyond the tolerance: at a few calls per
	// second, one call that crosses a second's edge is already more than the tolerance.
	recoveryEdgeCalls = 1
)

// caughtUp reports whether the load kept up in sec, by the recovery rule.
func caughtUp(sec Second) bool {
	return sec.OfferedFailed == 0 && float64(sec.Achieved+recoveryEdgeCalls) >= (1-RecoveryTolerance)*float64(sec.Offered)
}

// recoveryAfter measures recovery from a fault whose reference time is from, over the seconds of tl
// that end by until (at least the second that holds from). ok is false when the seconds did not catch
// up to the end of that span: not recovered. Times are seconds since the load started.
func recoveryAfter(tl []Second, from, until float64) (s float64, ok bool) {
	first := int(math.Floor(from))
	last := min(int(math.Floor(until))-1, len(tl)-1)
	if last < first {
		last = min(first, len(tl)-1)
	}
	if first < 0 || last < first {
		return 0, false
	}
	k := last + 1
	for k > first && caughtUp(tl[k-1]) {
		k--
	}
	if k == last+1 {
		return 0, false
	}
	// To the millisecond: the faults' times are measured to it, and the seconds are whole anyway.
	return math.Round(max(float64(k)-from, 0)*1000) / 1000, true
}

// recoveries fills each window's recovery and returns the longest, or nil when there is no window or
// one did not recover (named in notRecovered). A fault's span ends where the next fault (one that
// started at or after its reference time) starts, or at loadEnd. A window whose RecoveryFromS is
// negative (not known yet) is left out, except that it still ends the spans of those before it.
func recoveries(tl []Second, windows []FaultWindow, loadEnd float64) (longest *float64, notRecovered []string) {
	worst, measured := 0.0, 0
	for i := range windows {
		w := &windows[i]
		if w.RecoveryFromS < 0 {
			continue
		}
		measured++
		until := loadEnd
		for j, o := range windows {
			if j != i && o.StartS >= w.RecoveryFromS {
				until = min(until, o.StartS)
			}
		}
		w.RecoveryS = nil
		r, ok := recoveryAfter(tl, w.RecoveryFromS, until)
		if !ok {
			notRecovered = append(notRecovered, w.Name)
			continue
		}
		w.RecoveryS = &r
		worst = max(worst, r)
	}
	if measured == 0 || len(notRecovered) > 0 {
		return nil, notRecovered
	}
	return &worst, nil
}
