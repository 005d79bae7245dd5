package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
	"github.com/tunnelbench/tunnelbench/internal/procs"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// TestIdleCostCommand: the hidden command bench measures idle costs with writes one line of JSON,
// and refuses bad input with exit 2 and a reason.
func TestIdleCostCommand(t *testing.T) {
	code, out, stderr := runArgs(t, "idle-cost", "--tunnel", tunnels.Direct, "--agents", "5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var idle tunnels.IdleCost
	if err := json.Unmarshal([]byte(out), &idle); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("output %q: %v", out, err)
	}
	if idle.Agents != 5 || idle.GoroutinesPerAgent < 1 {
		t.Errorf("idle cost %+v", idle)
	}
	for _, args := range [][]string{{"--tunnel", "nope"}, {"--tunnel", tunnels.Direct, "--agents", "0"}} {
		code, _, stderr := runArgs(t, append([]string{"idle-cost"}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line", args, code, stderr)
		}
	}
}

// TestBenchPeersCommand runs the real binary with two peers: each tunnel's idle cost is measured in a
// child process (idle-cost) with a thousand agents, the peers' cases take turns with the direct
// baseline, and the side-by-side tables and plots are written.
func TestBenchPeersCommand(t *testing.T) {
	testtier.Full(t, "builds tunnelbench and connects a thousand agents to each of three tunnels")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	peers := tunnels.OpenconfigGrpctunnel + "," + tunnels.JhumpGrpctunnel
	cmd := exec.CommandContext(ctx, procs.Bin(t, "tunnelbench"), "bench", "--tunnels", peers, "--shapes", "unary-64B", "--concurrency", "1",
		"--warmup", "50ms", "--duration", "200ms", "--rounds", "2", "--scale", "none", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tunnelbench bench --tunnels %s: %v\n%s\n%s", peers, err, stdout.String(), stderr.String())
	}
	sum, err := bench.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Cases) != 3 || len(sum.Tunnels) != 3 {
		t.Fatalf("%d cases, tunnels %+v; want direct and the two peers", len(sum.Cases), sum.Tunnels)
	}
	for _, ti := range sum.Tunnels {
		if ti.Idle == nil || ti.Idle.Agents != tunnels.DefaultIdleAgents || ti.Idle.GoroutinesPerAgent < 1 {
			t.Errorf("%s: idle %+v", ti.Name, ti.Idle)
		}
	}
	for _, f := range []string{"plots/tunnels-p50.svg", "plots/tunnels-calls.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	report, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(report), "| "+tunnels.JhumpGrpctunnel+" | ") || !strings.Contains(stderr.String(), "idle cost of "+tunnels.OpenconfigGrpctunnel) {
		t.Errorf("no side-by-side rows or idle progress:\n%s\n%s", report, stderr.String())
	}
	// openconfig/grpctunnel prints a line per agent that leaves to stdout; the thousand idle agents
	// left in the idle-cost process, whose stdout carries only its report.
	if n := strings.Count(stdout.String(), "not in subscription list"); n > 1 {
		t.Errorf("%d lines of openconfig's noise in the table's output", n)
	}
}
