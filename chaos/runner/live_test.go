package runner

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// TestRunLiveMetricsAndProgress runs a scenario with an instant fault (agents restarted at 2 s) while
// a scraper reads the harness metrics every 50 ms, as Prometheus would: the fault's gauge is seen at
// 1, the run ends with it at 0 and with the recovery figure of its summary, and progress lines told
// the load while it ran.
func TestRunLiveMetricsAndProgress(t *testing.T) {
	testtier.Full(t, "runs a chaos scenario with seconds of load")
	sc := parse(t, "restart-live", `
name: restart-live
topology: {kas: 1, agents: 4, tunnels_per_agent: 2, find_timeout: 10s}
load: {shape: unary, payload: 1KiB, rate: 50, duration: 7s, call_timeout: 10s}
faults:
  - {at: 2s, process: restart-agents}
expect:
  recovery: "<= 4s"
  max_failed: 1000
`)
	reg := prometheus.NewRegistry()
	hm, err := harnessmetrics.NewOn(reg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		lines    []string
		seenHigh bool
	)
	scrapeDone := make(chan struct{})
	stopScrape := make(chan struct{})
	go func() {
		defer close(scrapeDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopScrape:
				return
			case <-tick.C:
			}
			mfs, err := reg.Gather()
			if err != nil {
				continue // t.Fatal is for the test's goroutine; a failed gather only misses a sample
			}
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					if mf.GetName() == harnessmetrics.FaultActiveMetric && m.GetGauge().GetValue() == 1 {
						mu.Lock()
						seenHigh = true
						mu.Unlock()
					}
				}
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Run(ctx, sc, Options{
		Metrics: hm, FaultHold: 2 * time.Second, ProgressEvery: 2 * time.Second,
		Progress: func(s string) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, s)
		},
	})
	close(stopScrape)
	<-scrapeDone
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range sum.Objectives {
		t.Logf("%v %s: want %s, got %s", o.OK, o.Name, o.Want, o.Got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !seenHigh {
		t.Error("no scrape saw tunnelbench_fault_active at 1 for the restart")
	}
	if v := gaugeValues(t, reg)["process/restart-agents"]; v != 0 {
		t.Errorf("fault gauge after the run: %v, want 0", v)
	}
	if sum.RecoveryS == nil {
		t.Fatalf("no recovery (not recovered: %v)", sum.NotRecovered)
	}
	if v, ok := recoveryValue(t, reg); !ok || v != *sum.RecoveryS {
		t.Errorf("recovery gauge %v (%v), summary %v", v, ok, *sum.RecoveryS)
	}
	progress := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "restart-live ") && strings.Contains(l, "offered ") && strings.Contains(l, "achieved ") && strings.Contains(l, "; faults: ") {
			progress++
		}
	}
	if progress < 2 {
		t.Errorf("%d progress lines during 7 s of load, want at least 2 (one every 2 s):\n%s", progress, strings.Join(lines, "\n"))
	}
}

// TestRunNotRecovered: a load that never catches up after its fault (one agent with one tunnel whose
// link is throttled to 20 KB/s for the rest of the run, while 50 calls/s are offered) is reported not
// recovered, and the run fails, whatever its calls' codes.
func TestRunNotRecovered(t *testing.T) {
	sum := runScenario(t, parse(t, "throttled", `
name: throttled
topology: {kas: 1, agents: 1, tunnels_per_agent: 1, find_timeout: 5s}
load: {shape: unary, payload: 1KiB, rate: 50, duration: 8s, call_timeout: 3s}
faults:
  - {at: 2s, link: agent->kas, type: bandwidth, params: {rate: 20KB/s}}
expect:
  recovery: "<= 5s"
  success_ratio: ">= 0"
`))
	if sum.Passed || sum.RecoveryS != nil || len(sum.NotRecovered) != 1 || len(sum.Faults) != 1 || sum.Faults[0].RecoveryS != nil {
		t.Fatalf("passed %v, recovery %v, not recovered %v, faults %+v; want not recovered", sum.Passed, sum.RecoveryS, sum.NotRecovered, sum.Faults)
	}
	if f := sum.Faults[0]; f.RecoveryFromS < f.StartS || f.RecoveryFromS > f.StartS+1 {
		t.Errorf("recovery counts from %v; the fault lasted to the end, so from when it was in place (%v)", f.RecoveryFromS, f.StartS)
	}
	for _, o := range sum.Objectives {
		if o.Name == "recovery <= 5s" && (o.OK || !strings.HasPrefix(o.Got, "not recovered")) {
			t.Errorf("recovery objective %+v", o)
		}
	}
	var achieved, offered int64
	for _, s := range sum.Timeline[3:8] {
		achieved, offered = achieved+s.Achieved, offered+s.Offered
		if s.Achieved != s.OK {
			t.Errorf("second %d: achieved %d, ok %d: a failed call counted as achieved", s.T, s.Achieved, s.OK)
		}
	}
	if achieved*2 > offered {
		t.Errorf("seconds 3-7 achieved %d of %d offered calls: the fault did not throttle the load", achieved, offered)
	}
}
