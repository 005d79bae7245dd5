package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/internal/cli"
	"github.com/tunnelbench/tunnelbench/internal/procs"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestBenchCommand runs the real binary on a tiny matrix with a small scale case whose agents run in a
// child process, as `make bench` does at full size.
func TestBenchCommand(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, procs.Bin(t, "tunnelbench"), "bench", "--shapes", "unary-64B", "--concurrency", "1",
		"--warmup", "50ms", "--duration", "300ms", "--rounds", "1", "--http-rate", "50", "--scale", "20", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tunnelbench bench: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	sum, err := bench.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	// direct, four tunnel paths and the grpc-proxy reference; HTTP direct, tunneled and the http-proxy
	// reference.
	withRatios := func(name string) bool {
		return slices.ContainsFunc(sum.Cases, func(c bench.CaseResult) bool { return c.Name == name && c.RatioToDirect != nil })
	}
	if len(sum.Cases) != 6+3 || len(sum.Scale) != 1 || !withRatios("unary-64B/c1/grpc-proxy") || !withRatios("http-get-1KiB/r50/http-proxy") {
		t.Fatalf("%d cases (want the grpc-proxy and http-proxy references among them, with their ratios) and %d scale steps", len(sum.Cases), len(sum.Scale))
	}
	sc := sum.Scale[0]
	if sc.Agents != 20 || sc.Tunnels != 20*bench.DefaultTunnelsPerAgent || sc.AgentHeapBytesPerAgent <= 0 || sc.KasHeapBytesPerTunnel <= 0 || sc.Errors != 0 {
		t.Fatalf("scale step %+v", sc)
	}
	// Stacks and goroutines beside the heap, on both sides (an agent is at least its tunnel's reader).
	if sc.KasStackBytesPerTunnel <= 0 || sc.AgentStackBytesPerAgent <= 0 || sc.AgentGoroutinesPerAgent < 1 {
		t.Fatalf("scale step without stacks or goroutines: %+v", sc)
	}
	for _, f := range []string{"report.md", "plots/latency.svg", "plots/ratio.svg", "plots/scale-heap.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if !strings.Contains(stdout.String(), "unary-64B/c1/tunnel") || !strings.Contains(stderr.String(), "done") {
		t.Errorf("no table or progress:\n%s\n%s", stdout.String(), stderr.String())
	}

	// --compare with the same settings: compared (not refused), the verdict printed and written. Whether
	// a ratio moved beyond this noisy machine's noise is not asserted.
	cmpOut := t.TempDir()
	cmd = exec.CommandContext(ctx, procs.Bin(t, "tunnelbench"), "bench", "--shapes", "unary-64B", "--concurrency", "1", "--paths", "direct,tunnel",
		"--warmup", "50ms", "--duration", "300ms", "--rounds", "1", "--http-rate", "0", "--scale", "none", "--out", cmpOut, "--compare", out)
	b, err := cmd.CombinedOutput()
	if !strings.Contains(string(b), "Compared with") || strings.Contains(string(b), "REFUSED") {
		t.Fatalf("no comparison printed, or a refused one (%v):\n%s", err, b)
	}
	var doc struct{ Verdict string }
	if b, err := os.ReadFile(filepath.Join(cmpOut, bench.CompareFile)); err != nil || json.Unmarshal(b, &doc) != nil || doc.Verdict == bench.VerdictRefused || doc.Verdict == "" {
		t.Errorf("compare.json: %v, verdict %q", err, doc.Verdict)
	}
	if b, err := os.ReadFile(filepath.Join(cmpOut, "report.md")); err != nil || !strings.Contains(string(b), "**Verdict: ") {
		t.Errorf("report.md holds no verdict (%v)", err)
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--shapes", "unary-xyz"},
		{"bench", "--paths", "nowhere"},
		{"bench", "--concurrency", "0"},
		{"bench", "--cases", "("},
		{"bench", "--cases", "nomatch-at-all"},
		{"bench", "--compare", "/does/not/exist"},
		{"bench", "--transport", "pigeon"},
		{"bench", "--max-error-rate", "2"},
		{"bench", "--max-error-rate", "-0.1"},
		{"bench", "--token-file", "caller-token.txt"},                // without --target
		{"bench", "--kas-ca-file", "ca.pem", "--target", "kas:8153"}, // no such file
		{"bench", "--token-file", "/does/not/exist", "--target", "kas:8153"},
		{"bench", "--tls-cert-file", "client.pem", "--target", "kas:8153"}, // no TLS, no key
		{"bench", "--kas-tls", "--tls-cert-file", "client.pem", "--target", "kas:8153"},
		{"nonsense"},
		{},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, &stdout, &stderr)
		if code := cli.ExitCode("tunnelbench", err, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%v)", args, code, err)
		}
		if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n"); len(args) > 0 && lines > 0 {
			t.Errorf("%v: want a one-line reason, got:\n%s", args, stderr.String())
		}
	}
}

// TestBenchProcesses runs the topology as separate processes (kas ×2 over Redis, agentk, demo-server),
// and against it again as a --target deployment.
func TestBenchProcesses(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, procs.Bin(t, "tunnelbench"), "bench", "--processes", "--shapes", "unary-64B", "--concurrency", "2",
		"--warmup", "50ms", "--duration", "300ms", "--rounds", "1", "--http-rate", "0", "--scale", "none", "--out", out).CombinedOutput()
	if err != nil {
		t.Fatalf("tunnelbench bench --processes: %v\n%s", err, b)
	}
	sum, err := bench.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, c := range sum.Cases {
		paths[c.Path] = true
		if c.Errors != 0 || c.Calls == 0 {
			t.Errorf("%s: %d calls, %d errors", c.Name, c.Calls, c.Errors)
		}
		if c.Path == "tunnel-2hop" && (c.Routing == nil || c.RatioToDirect == nil) {
			t.Errorf("%s: routing %v, ratio %v", c.Name, c.Routing, c.RatioToDirect)
		} else if c.Path == "tunnel-2hop" && c.Routing.Source != "tunnel_routing_duration_exponential_seconds" {
			t.Errorf("%s: routing percentiles from %q, not the scraped exponential histogram", c.Name, c.Routing.Source)
		}
	}
	if !paths["direct"] || !paths["tunnel-public"] || !paths["tunnel-2hop"] || paths["tunnel"] {
		t.Fatalf("paths %v", paths)
	}
}

// TestBenchCompareRefused: --compare against a run from another machine with other settings prints the
// figures with the refusal, writes it into report.md and compare.json, and exits 1.
func TestBenchCompareRefused(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	baseline := filepath.Join("..", "..", "bench", "testdata", "summary.json") // "Test CPU", 1 s in 2 rounds
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"bench", "--shapes", "unary-64B", "--concurrency", "1", "--paths", "direct,tunnel", "--warmup", "1ms",
		"--duration", "200ms", "--rounds", "1", "--transport", "bufconn", "--http-rate", "0", "--scale", "none", "--out", out, "--compare", baseline}, &stdout, &stderr)
	if code := cli.ExitCode("tunnelbench", err, &stderr); code != 1 || !strings.Contains(stderr.String(), "comparison refused") {
		t.Fatalf("exit %d, want 1 for a refused comparison:\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "REFUSED: the runs measured differently (") || !strings.Contains(stdout.String(), "duration 1s → 0.2s") {
		t.Errorf("no refusal printed:\n%s", stdout.String())
	}
	report, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(report), "## Comparison with `"+baseline+"`") || !strings.Contains(string(report), "**Verdict: REFUSED") {
		t.Errorf("report.md has no comparison verdict:\n%s", report)
	}
	var doc struct{ Verdict string }
	b, _ := os.ReadFile(filepath.Join(out, bench.CompareFile))
	if err := json.Unmarshal(b, &doc); err != nil || doc.Verdict != bench.VerdictRefused {
		t.Errorf("compare.json: %v, verdict %q", err, doc.Verdict)
	}
}
