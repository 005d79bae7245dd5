package runner

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/internal/golden"
)

// tunnelSummary is the fixture as a run against another tunnel: no kas, so no routing, tunnels or
// waiting calls, and what only this project's tunnel has left out by name.
func tunnelSummary(t *testing.T) *Summary {
	s := passedSummary(t)
	s.Scenario, s.Tunnel, s.File = "agent-latency", "openconfig-grpctunnel", "scenarios/agent-latency.yaml"
	s.Description = "Every agent link gets 100 ms ± 20 ms of latency each way for 30 s."
	s.NotApplied = []string{
		"tunnels_per_agent: 4 (agentk's idle tunnels; openconfig-grpctunnel keeps what it keeps)",
		"find_timeout: 5s (how long kas waits for a tunnel)",
		"objective routing_timeouts == 0 (kas's tunnel_routing_timeout_total)",
	}
	s.Routing = Routing{}
	for i := range s.Timeline {
		sec := &s.Timeline[i]
		sec.RoutingCounts, sec.RoutingTimeouts, sec.TunnelsIdle, sec.TunnelsBusy, sec.WaitingCalls = nil, 0, 0, 0, 0
	}
	return s
}

// TestWriteMarkdownTunnelGolden: a run against another tunnel names it in the title, says how it ran
// and what it left out, and shows no kas figures as if they were zero.
func TestWriteMarkdownTunnelGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, tunnelSummary(t)); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "report-tunnel.golden.md", b.Bytes())
	first, _, _ := strings.Cut(b.String(), "\n")
	if !strings.HasPrefix(first, "# agent-latency on openconfig-grpctunnel — PASSED") {
		t.Errorf("first line %q does not name the tunnel", first)
	}
	if !strings.Contains(b.String(), "- objective routing_timeouts == 0 (kas's tunnel_routing_timeout_total)") {
		t.Error("the objective left out is not named")
	}
}

// TestWritePlotsTunnel: a run against another tunnel gets no chart of kas's figures.
func TestWritePlotsTunnel(t *testing.T) {
	files, err := WritePlots(t.TempDir(), tunnelSummary(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".svg"))
	}
	for _, fig := range PlotFigures {
		if got := slices.Contains(names, fig.Name); got == fig.KasOnly {
			t.Errorf("%s written %v, kas only %v", fig.Name, got, fig.KasOnly)
		}
	}
}
