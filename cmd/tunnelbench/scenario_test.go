package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/chaos/runner"
	"github.com/tunnelbench/tunnelbench/internal/cli"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

func writeScenario(t *testing.T, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestScenarioRunFailuresExitNonZero: a scenario that bounds only latency, whose load fails calls (an
// agent link that drops every byte for the rest of the run), used to pass: its failed calls were
// allowed by saying nothing. It now exits 1, prints its progress while the load runs and its errors by
// code, and its results say the calls never caught up.
func TestScenarioRunFailuresExitNonZero(t *testing.T) {
	testtier.Full(t, "runs a chaos scenario with seconds of load")
	file := writeScenario(t, `
name: silent-failures
topology: {kas: 1, agents: 2, tunnels_per_agent: 2, find_timeout: 1s}
load: {shape: unary, payload: 1KiB, rate: 40, duration: 7s, call_timeout: 1s}
faults:
  - {at: 2s, link: agent->kas, type: blackhole, select: {agents: 1}}
expect:
  latency_p50: "<= 5s"
`)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"scenario", "run", file, "--out", out}, &stdout, &stderr)
	if code := cli.ExitCode("tunnelbench", err, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1 (%v)\n%s\n%s", code, err, stdout.String(), stderr.String())
	}
	progress := 0
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "silent-failures ") && strings.Contains(l, "offered ") && strings.Contains(l, "; faults: ") {
			progress++
		}
	}
	if progress == 0 {
		t.Errorf("no progress line while the load ran:\n%s", stderr.String())
	}
	for _, want := range []string{
		"✗ invariant: no failed call (the scenario bounds no failures)",
		"failed (DeadlineExceeded",
		"recovery not recovered",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout does not say %q:\n%s", want, stdout.String())
		}
	}
	sum, err := runner.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Passed || len(sum.NotRecovered) != 1 || sum.Calls.FailedByCode["DeadlineExceeded"] == 0 {
		t.Errorf("passed %v, not recovered %v, failed %v", sum.Passed, sum.NotRecovered, sum.Calls.FailedByCode)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "**Not recovered:**") {
		t.Errorf("report.md does not say not recovered (%v)", err)
	}
}

// TestScenarioBadFaultOneError: an invalid fault exits 2 with one line that names the one mistake.
func TestScenarioBadFaultOneError(t *testing.T) {
	for _, tc := range []struct{ fault, want string }{
		{"{at: 1s, process: kill-kas, select: {kas: 7}}", "faults[0].select.kas: no kas 7 (the topology has kas 0..1)"},
		{"{at: 1s, link: agent->kas, type: latency, params: 100ms}", "faults[0].params: want a mapping of parameters"},
		{"{at: 1s, link: agent->kas, type: kill-kas}", "faults[0].type: kill-kas is a process fault"},
	} {
		file := writeScenario(t, "name: bad\ntopology: {kas: 2}\nload: {rate: 1, duration: 5s}\nexpect: {zero_failed: true}\nfaults:\n  - "+tc.fault+"\n")
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"scenario", "run", file, "--out", t.TempDir()}, &stdout, &stderr)
		if code := cli.ExitCode("tunnelbench", err, &stderr); code != 2 {
			t.Errorf("%s: exit %d, want 2", tc.fault, code)
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "\n") || strings.Contains(msg, "; ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: want one line with one error, %q; got:\n%s", tc.fault, tc.want, msg)
		}
	}
}
