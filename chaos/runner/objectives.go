package runner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
)

// checkObjectives measures each objective of the scenario and records it with its verdict.
func checkObjectives(sum *Summary, sc *scenario.Scenario, rec *recorder, s *sampler, ft *faultTimeline) {
	refs := map[scenario.Ref]float64{}
	var inflight int64
	kills := ft.kills()
	for _, k := range kills {
		inflight += inflightDuring(rec, k)
	}
	if len(kills) > 0 {
		refs[scenario.RefInflightAtKill] = float64(inflight)
	}
	affected, known := sc.AffectedAgents()
	for _, o := range sc.Expect {
		if sum.Tunnel != "" && o.ProjectOnly() != "" {
			continue // measured from kas; sum.NotApplied names it
		}
		records := rec.records
		if o.Scope == scenario.ScopeUnaffected {
			if !known {
				sum.Objectives = append(sum.Objectives, ObjectiveResult{Name: o.String(), Want: o.Text, Got: "not measurable: the faults select agents by kas", OK: false})
				continue
			}
			records = nil
			for _, r := range rec.records {
				if !slices.Contains(affected, r.agent) {
					records = append(records, r)
				}
			}
		}
		got, display, err := measure(o, records, sum, s)
		want := o.Text
		if o.Ref == "" && (want == "true" || want == "") {
			want = fmt.Sprintf("%s %s", o.Op, fmtFloat(o.Threshold)) // zero_failed: true
		}
		res := ObjectiveResult{Name: o.String(), Want: want, Got: display}
		if err == nil {
			res.OK, err = o.Met(got, refs)
		}
		if err != nil {
			res.Got, res.OK = err.Error(), false
		}
		if o.Ref != "" {
			if v, ok := refs[o.Ref]; ok {
				res.Want = fmt.Sprintf("%s (%s)", o.Text, fmtFloat(v))
			}
		}
		sum.Objectives = append(sum.Objectives, res)
	}
}

// measure returns an objective's actual value and how to show it.
func measure(o scenario.Objective, records []record, sum *Summary, s *sampler) (float64, string, error) {
	switch o.Metric {
	case scenario.SuccessRatio:
		if len(records) == 0 {
			return 0, "", fmt.Errorf("no calls to measure")
		}
		ok := 0
		for _, r := range records {
			if r.code == codes.OK {
				ok++
			}
		}
		v := float64(ok) / float64(len(records))
		return v, fmt.Sprintf("%.5f (%d of %d)", v, ok, len(records)), nil
	case scenario.LatencyP50, scenario.LatencyP90, scenario.LatencyP99:
		if len(records) == 0 {
			return 0, "", fmt.Errorf("no calls to measure")
		}
		q := map[scenario.Metric]float64{scenario.LatencyP50: 50, scenario.LatencyP90: 90, scenario.LatencyP99: 99}[o.Metric]
		h := load.NewHistogram()
		for _, r := range records {
			record2hist(h, r.dur)
		}
		d := time.Duration(h.ValueAtQuantile(q)) * time.Microsecond
		return d.Seconds(), d.String(), nil
	case scenario.RoutingTimeouts:
		return float64(sum.Routing.Timeouts), fmt.Sprint(sum.Routing.Timeouts), nil
	case scenario.Recovery:
		switch {
		case len(sum.NotRecovered) > 0:
			return 0, "", fmt.Errorf("not recovered: calls never caught up after %s", strings.Join(sum.NotRecovered, ", "))
		case sum.RecoveryS == nil:
			return 0, "", fmt.Errorf("no fault was applied, so there was nothing to recover from")
		}
		return *sum.RecoveryS, (time.Duration(*sum.RecoveryS * float64(time.Second))).Round(time.Millisecond).String(), nil
	case scenario.FailedCalls:
		var n int64
		for _, r := range records {
			if r.code != codes.OK {
				n++
			}
		}
		return float64(n), fmt.Sprint(n), nil
	case scenario.ReconnectRate:
		v := s.peakReconnectRate()
		return v, fmt.Sprintf("%.0f/s", v), nil
	}
	return 0, "", fmt.Errorf("unknown objective %s", o.Metric)
}

// checkInvariants records what must hold in every run: every call has one outcome, no call outlives its
// deadline by more than DeadlineSlack, the topology leaves no goroutine behind, and a scenario that
// bounds no failures has none.
func checkInvariants(sum *Summary, sc *scenario.Scenario, rec *recorder, leaked int) {
	var failed int64
	for _, n := range sum.Calls.FailedByCode {
		failed += n
	}
	got := fmt.Sprintf("%d = %d + %d", sum.Calls.Sent, sum.Calls.OK, failed)
	if sum.Calls.Missed > 0 {
		got += fmt.Sprintf(" (and %d missed)", sum.Calls.Missed)
	}
	sum.Objectives = append(sum.Objectives, ObjectiveResult{
		Name: "invariant: one outcome per call", Want: "sent = ok + failed", Got: got,
		// Every offered call was sent or missed.
		OK: sum.Calls.Sent == sum.Calls.OK+failed && sum.Calls.Sent+sum.Calls.Missed == int64(len(rec.offered)),
	})
	var worst time.Duration
	for _, r := range rec.records {
		// A call's deadline counts from when it started; its latency from when it was due.
		over := r.dur - (r.start - r.due) - sc.Load.CallTimeout
		worst = max(worst, over)
	}
	sum.Objectives = append(sum.Objectives, ObjectiveResult{
		Name: "invariant: calls end by their deadline", Want: fmt.Sprintf("<= %s late", DeadlineSlack),
		Got: max(worst, 0).Round(time.Millisecond).String() + " late", OK: worst <= DeadlineSlack,
	})
	sum.Objectives = append(sum.Objectives, ObjectiveResult{
		Name: "invariant: no goroutine growth after the topology stops", Want: fmt.Sprintf("<= %d", goroutineSlack),
		Got: fmt.Sprint(leaked), OK: leaked <= goroutineSlack,
	})
	if !boundsFailures(sc) {
		sum.Objectives = append(sum.Objectives, ObjectiveResult{
			Name: "invariant: no failed call (the scenario bounds no failures)", Want: "0 failed",
			Got: fmt.Sprintf("%d failed%s", failed, reportCodesInline(sum.Calls.FailedByCode)), OK: failed == 0,
		})
	}
}

// boundsFailures reports whether an objective of the scenario says how many calls may fail, in any
// scope. One that bounds only unaffected calls allows the calls to the agents its faults select to
// fail; one that bounds none allows no failure at all.
func boundsFailures(sc *scenario.Scenario) bool {
	for _, o := range sc.Expect {
		if o.Metric == scenario.SuccessRatio || o.Metric == scenario.FailedCalls {
			return true
		}
	}
	return false
}
