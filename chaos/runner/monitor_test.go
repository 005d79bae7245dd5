package runner

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
)

// monitorScenario has a latency fault from 2 s to the end of its 20 s load, and a kill at 5 s.
func monitorScenario(t *testing.T) *scenario.Scenario {
	return parse(t, "live", `
name: live
topology: {kas: 2, agents: 4}
load: {rate: 10, duration: 20s}
faults:
  - {at: 2s, link: agent->kas, type: latency, params: {latency: 200ms}}
  - {at: 5s, process: kill-kas, select: {kas: 1}}
expect: {recovery: "<= 5s"}
`)
}

// offerSeconds offers rate calls in each of the seconds [from, to) and records achieved of them as
// succeeded (and failed of them as Unavailable) in the same second.
func offerSeconds(rec *recorder, from, to int, rate, achieved, failed int) {
	for s := from; s < to; s++ {
		for i := range rate {
			due := time.Duration(s)*time.Second + time.Duration(i)*time.Second/time.Duration(rate)
			rec.offer(due)
			switch {
			case i < achieved:
				rec.add(record{due: due, start: due, dur: time.Millisecond, code: codes.OK})
			case i < achieved+failed:
				rec.add(record{due: due, start: due, dur: time.Millisecond, code: codes.Unavailable})
			}
		}
	}
}

// TestMonitorProgressLine: a progress line tells the offered and achieved rates and the failures by
// code since the last line, and the faults active, the instant ones that struck since then included.
func TestMonitorProgressLine(t *testing.T) {
	sc := monitorScenario(t)
	rec := &recorder{}
	ft := newFaultTimeline(sc, nil, nil, time.Second)
	m := newMonitor(sc, rec, ft, Options{})
	offerSeconds(rec, 0, 5, 10, 10, 0)
	if got, want := m.line(5*time.Second), "live 5s/20s: offered 10/s, achieved 10/s, failed 0 in 5s; faults: none"; got != want {
		t.Errorf("first line:\n%s\nwant\n%s", got, want)
	}
	m.lastProgress = 5 * time.Second

	offerSeconds(rec, 5, 10, 10, 4, 3)
	ft.states[0].applied, ft.states[0].done = true, 2*time.Second // the latency fault, on
	ft.states[1].applied, ft.states[1].done = true, 5*time.Second // the kill, struck at 5 s
	if got, want := m.line(10*time.Second), "live 10s/20s: offered 10/s, achieved 4/s, failed 15 in 5s (Unavailable 15); faults: 2s agent->kas latency (all), 5s kill-kas (kas [1]) (done)"; got != want {
		t.Errorf("second line:\n%s\nwant\n%s", got, want)
	}
	m.lastProgress = 10 * time.Second
	if got, want := m.line(15*time.Second), "live 15s/20s: offered 0/s, achieved 0/s, failed 0 in 5s; faults: 2s agent->kas latency (all)"; got != want {
		t.Errorf("third line (the kill is not repeated):\n%s\nwant\n%s", got, want)
	}
	m.lastProgress = 15 * time.Second

	// After the load, while calls in flight finish: offered over the load's last 5 s only.
	offerSeconds(rec, 15, 20, 10, 10, 0)
	if got, want := m.line(22*time.Second), "live 20s/20s+2s for calls in flight: offered 10/s, achieved 7/s, failed 0 in 7s; faults: 2s agent->kas latency (all)"; got != want {
		t.Errorf("line after the load:\n%s\nwant\n%s", got, want)
	}
	m.lastProgress = 22 * time.Second
	if got, want := m.line(27*time.Second), "live 20s/20s+7s for calls in flight: offered 0/s, achieved 0/s, failed 0 in 5s; faults: 2s agent->kas latency (all)"; got != want {
		t.Errorf("line long after the load:\n%s\nwant\n%s", got, want)
	}
}

// recoveryValue reads tunnelbench_recovery_seconds of scenario live; ok is false without the series.
func recoveryValue(t *testing.T, reg *prometheus.Registry) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == harnessmetrics.RecoveryMetric {
			for _, m := range mf.GetMetric() {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestMonitorLiveRecovery: while the load runs, the recovery figure appears once a fault's first
// second is over and calls caught up, and goes away while they have not.
func TestMonitorLiveRecovery(t *testing.T) {
	sc := monitorScenario(t)
	reg := prometheus.NewRegistry()
	hm, err := harnessmetrics.NewOn(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	ft := newFaultTimeline(sc, nil, hm, time.Second)
	m := newMonitor(sc, rec, ft, Options{Metrics: hm})

	// Before any fault: no figure.
	offerSeconds(rec, 0, 2, 10, 10, 0)
	m.liveRecovery(2 * time.Second)
	if _, ok := recoveryValue(t, reg); ok {
		t.Fatal("a recovery figure before any fault")
	}
	// The latency fault (to the end of the load) in place at 2.1 s; second 2 falls behind.
	ft.states[0].applied, ft.states[0].done = true, 2100*time.Millisecond
	ft.states[0].window = FaultWindow{Name: ft.states[0].name, StartS: 2.1, EndS: 2.1}
	offerSeconds(rec, 2, 3, 10, 5, 0)
	m.liveRecovery(2500 * time.Millisecond)
	if _, ok := recoveryValue(t, reg); ok {
		t.Fatal("a recovery figure before the fault's first second is over")
	}
	m.liveRecovery(3100 * time.Millisecond)
	if _, ok := recoveryValue(t, reg); ok {
		t.Fatal("a recovery figure while calls are behind")
	}
	// Second 3 catches up: recovered 0.9 s after the fault was in place.
	offerSeconds(rec, 3, 4, 10, 10, 0)
	m.liveRecovery(4100 * time.Millisecond)
	if v, ok := recoveryValue(t, reg); !ok || v != 0.9 {
		t.Fatalf("recovery %v (%v), want 0.9", v, ok)
	}
	// Second 4 falls behind again: no figure until it is back.
	offerSeconds(rec, 4, 5, 10, 2, 0)
	m.liveRecovery(5100 * time.Millisecond)
	if v, ok := recoveryValue(t, reg); ok {
		t.Fatalf("recovery %v while calls fell behind again", v)
	}
}
