package runner

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
)

// gaugeValues reads tunnelbench_fault_active by "link/fault".
func gaugeValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != harnessmetrics.FaultActiveMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["link"]+"/"+labels["fault"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

func newTestGauge(t *testing.T, hold time.Duration) (*faultGauge, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := harnessmetrics.NewOn(reg)
	if err != nil {
		t.Fatal(err)
	}
	return newFaultGauge(m, "s", hold), reg
}

// TestFaultGaugeHoldsInstantFaults: an instant fault (a kill) sets the gauge to 1 and keeps it there
// for the hold, so a scrape every 5 s sees it; a fault longer than the hold ends when it is removed.
func TestFaultGaugeHoldsInstantFaults(t *testing.T) {
	g, reg := newTestGauge(t, 6*time.Second)
	t0 := time.Unix(1000, 0)
	g.applied("process", "kill-kas", t0)
	g.ended("process", "kill-kas", t0)
	if v := gaugeValues(t, reg)["process/kill-kas"]; v != 1 {
		t.Fatalf("kill-kas right after it struck: %v, want 1", v)
	}
	// Any scrape within the hold sees 1; every 5 s window starting at the kill holds such a scrape.
	g.expire(t0.Add(5999 * time.Millisecond))
	if v := gaugeValues(t, reg)["process/kill-kas"]; v != 1 {
		t.Fatalf("kill-kas 5.999 s after: %v, want 1", v)
	}
	g.expire(t0.Add(6 * time.Second))
	if v := gaugeValues(t, reg)["process/kill-kas"]; v != 0 {
		t.Fatalf("kill-kas after the hold: %v, want 0", v)
	}

	// A long fault: 0 as soon as it is removed.
	g.applied("agent->kas", "latency", t0)
	g.expire(t0.Add(20 * time.Second))
	if v := gaugeValues(t, reg)["agent->kas/latency"]; v != 1 {
		t.Fatalf("latency while applied: %v, want 1", v)
	}
	g.ended("agent->kas", "latency", t0.Add(30*time.Second))
	if v := gaugeValues(t, reg)["agent->kas/latency"]; v != 0 {
		t.Fatalf("latency after removal: %v, want 0", v)
	}
}

// TestFaultGaugeOverlaps: two faults with the same labels keep the series at 1 until the last ends,
// and a second activation restarts the hold.
func TestFaultGaugeOverlaps(t *testing.T) {
	g, reg := newTestGauge(t, 6*time.Second)
	t0 := time.Unix(1000, 0)
	g.applied("agent->kas", "reset-peer", t0)
	g.applied("agent->kas", "reset-peer", t0.Add(10*time.Second))
	g.ended("agent->kas", "reset-peer", t0.Add(12*time.Second))
	if v := gaugeValues(t, reg)["agent->kas/reset-peer"]; v != 1 {
		t.Fatalf("one of two faults ended: %v, want 1", v)
	}
	g.ended("agent->kas", "reset-peer", t0.Add(13*time.Second))
	g.expire(t0.Add(15 * time.Second))
	if v := gaugeValues(t, reg)["agent->kas/reset-peer"]; v != 1 {
		t.Fatalf("5 s after the second was applied: %v, want 1 (held)", v)
	}
	g.expire(t0.Add(16 * time.Second))
	if v := gaugeValues(t, reg)["agent->kas/reset-peer"]; v != 0 {
		t.Fatalf("after the second's hold: %v, want 0", v)
	}
}

// TestFaultGaugeFlush: the end of a run waits out the hold of its last fault (bounded by the hold),
// then leaves every series at 0; a cancelled context cuts the wait short.
func TestFaultGaugeFlush(t *testing.T) {
	g, reg := newTestGauge(t, 50*time.Millisecond)
	now := time.Now()
	g.applied("process", "kill-kas", now)
	g.ended("process", "kill-kas", now)
	g.flush(context.Background())
	if time.Since(now) < 50*time.Millisecond {
		t.Errorf("flush returned before the hold passed")
	}
	if v := gaugeValues(t, reg)["process/kill-kas"]; v != 0 {
		t.Fatalf("after flush: %v, want 0", v)
	}

	g, reg = newTestGauge(t, time.Hour)
	g.applied("process", "stop-kas", time.Now())
	g.ended("process", "stop-kas", time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.flush(ctx)
	if v := gaugeValues(t, reg)["process/stop-kas"]; v != 0 {
		t.Fatalf("after a cancelled flush: %v, want 0", v)
	}
}

// TestFaultGaugeWithoutMetrics: a run without metrics records nothing and never waits.
func TestFaultGaugeWithoutMetrics(t *testing.T) {
	g := newFaultGauge(nil, "s", time.Hour)
	g.applied("process", "kill-kas", time.Now())
	g.ended("process", "kill-kas", time.Now())
	g.expire(time.Now())
}
