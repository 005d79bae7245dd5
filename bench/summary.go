package bench

import (
	"fmt"

	"github.com/tunnelbench/tunnelbench/bench/result"
	"github.com/tunnelbench/tunnelbench/internal/summaryfile"
)

// SummarySchema names the format of summary.json. Scripts depend on it: change it only with a new version.
//
// v3 made the tunnel a dimension (--tunnels): each case names the tunnel it measured, the summary
// lists the tunnels with their idle cost, a case may have stalled (stall, and then no figures), and
// cases record CPU time per call. v2 changed the meaning of calls_per_s and bytes_per_s (successful
// calls only; v1 counted failed calls too) and added settings, failed cases and rounds. ReadSummary
// still reads v2 and v1.
const SummarySchema = "tunnelbench/bench/v3"

// Earlier formats, still read (results/baseline may hold one) but never written.
const (
	SummarySchemaV2 = "tunnelbench/bench/v2"
	SummarySchemaV1 = "tunnelbench/bench/v1"
)

// Summary is summary.json.
type Summary struct {
	Schema string        `json:"schema"`
	Env    Env           `json:"env"`
	Cases  []CaseResult  `json:"cases"`
	Scale  []ScaleResult `json:"scale"`
	// MergedFrom lists the runs that tunnelbench merge combined into this summary.
	MergedFrom []MergedRun `json:"merged_from,omitempty"`

	// Settings are how the run measured; nil in a v1 summary, which did not record them.
	Settings *Settings `json:"settings,omitempty"`
	// Tunnels are the tunnels the run measured (--tunnels), the direct baseline first; absent before v3.
	Tunnels []TunnelInfo `json:"tunnels,omitempty"`
}

// Env records what the run ran on (result.Env, which chaos summaries share).
type Env = result.Env

// Latency percentiles in microseconds (result.Latency, which chaos summaries share).
type Latency = result.Latency

// Routing is what the routing kas recorded during a case. Percentiles are estimated from the histogram
// named by Source: tunnel_routing_duration_exponential_seconds (within ResolutionPct), or the
// tunnel_routing_duration_seconds buckets (1 ms first) of a kas without it.
type Routing struct {
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
	Timeouts int64   `json:"timeouts"`
	// Source is the kas metric the percentiles come from; ResolutionPct bounds their error in percent
	// (0: the buckets', which is up to a bucket's width).
	Source        string  `json:"source,omitempty"`
	ResolutionPct float64 `json:"resolution_pct,omitempty"`
	// BucketBoundsS are the histogram's finite upper bounds in seconds; BucketCounts has one count per
	// bucket (not cumulative), plus one for routings above the last bound.
	BucketBoundsS []float64 `json:"bucket_bounds_s,omitempty"`
	BucketCounts  []uint64  `json:"bucket_counts,omitempty"`
}

// Ratio compares a tunneled case with its direct pair: tunnel / direct.
type Ratio struct {
	P50         float64 `json:"p50"`
	P99         float64 `json:"p99"`
	CallsPerSec float64 `json:"calls_per_s"`
	BytesPerSec float64 `json:"bytes_per_s"`
}

// CaseResult is one case of the matrix.
type CaseResult struct {
	Name          string           `json:"name"`
	Path          string           `json:"path"`
	Shape         string           `json:"shape"`
	PayloadBytes  int              `json:"payload_bytes"`
	Concurrency   int              `json:"concurrency"`
	Mode          string           `json:"mode"`
	Calls         int64            `json:"calls"`
	Errors        int64            `json:"errors"`
	ErrorsByCode  map[string]int64 `json:"errors_by_code,omitempty"`
	CallsPerSec   float64          `json:"calls_per_s"`
	BytesPerSec   float64          `json:"bytes_per_s"`
	OfferedPerSec float64          `json:"offered_per_s,omitempty"`
	Latency       Latency          `json:"latency_us"`
	AllocsPerCall float64          `json:"allocs_per_call"`
	Routing       *Routing         `json:"routing"`
	RatioToDirect *Ratio           `json:"ratio_to_direct"`
	// Pair is the name of the direct case this one is compared with.
	Pair string `json:"direct_pair,omitempty"`
	// LatencyHDR is Latency's whole histogram (result.EncodeHistogram), which merges across runs.
	LatencyHDR string `json:"latency_hdr,omitempty"`
	// Failed says that more calls failed than the run tolerates (Settings.MaxErrorRate), or that none
	// finished: the case's figures describe errors, not the tunnel.
	Failed bool `json:"failed,omitempty"`
	// Rounds are the case's turns, in order (see Options.Rounds); Spread and RatioSpread say how much
	// its figures moved between them. All three are absent with one round.
	Rounds      []RoundResult `json:"rounds,omitempty"`
	Spread      *Spread       `json:"spread,omitempty"`
	RatioSpread *Spread       `json:"ratio_spread,omitempty"`
	// Tunnel is the tunnel the case measured (a --tunnels name; direct for the baseline); empty before
	// v3. This project's tunnel is measured on several paths (tunnel, tunnel-public, tunnel-2hop).
	Tunnel string `json:"tunnel,omitempty"`
	// CPUusPerCall is this process's CPU time (user and system) during the timed run divided by the
	// calls: caller, tunnel and agent together when they all run in this process, as AllocsPerCall;
	// absent when part of the topology ran elsewhere (--processes, --target).
	CPUusPerCall float64 `json:"cpu_us_per_call,omitempty"`
	// Stall is set when the tunnel stopped completing calls during the case: the case is a result
	// (stalled), not a failure, and has no figures (its numbers are zero and mean nothing).
	Stall *StallResult `json:"stall,omitempty"`
}

// Stalled says that the case stalled: it has no figures.
func (c *CaseResult) Stalled() bool { return c.Stall != nil }

// RoundResult is one turn of a case.
type RoundResult struct {
	Calls       int64   `json:"calls"`
	Errors      int64   `json:"errors"`
	CallsPerSec float64 `json:"calls_per_s"`
	BytesPerSec float64 `json:"bytes_per_s"`
	P50us       int64   `json:"p50_us"`
	P99us       int64   `json:"p99_us"`
}

// Spread is how much a figure moved over a case's rounds, relative: (max − min) ÷ median of the
// per-round values, so 0.08 means the rounds spanned 8% of the typical one. For RatioSpread the
// per-round values are the ratios to the direct pair's same round.
type Spread struct {
	P50         float64 `json:"p50"`
	P99         float64 `json:"p99"`
	CallsPerSec float64 `json:"calls_per_s"`
	BytesPerSec float64 `json:"bytes_per_s"`
}

// ScaleResult is one step of the scale case.
type ScaleResult struct {
	Agents                  int     `json:"agents"`
	Tunnels                 int     `json:"tunnels"`
	ConnectS                float64 `json:"connect_s"`
	KasHeapBytesPerTunnel   float64 `json:"kas_heap_bytes_per_tunnel"`
	KasGoroutinesPerTunnel  float64 `json:"kas_goroutines_per_tunnel"`
	AgentHeapBytesPerTunnel float64 `json:"agent_heap_bytes_per_tunnel"`
	AgentHeapBytesPerAgent  float64 `json:"agent_heap_bytes_per_agent"`
	RoutingP99us            float64 `json:"routing_p99_us"`
	Calls                   int64   `json:"calls"`
	Errors                  int64   `json:"errors"`
	// Goroutine stacks beside the heap (added within v3: absent, that is zero, in older summaries). The
	// agent figures are the agents process's, as its heap is; -1 when the agents share kas's process.
	KasStackBytesPerTunnel  float64 `json:"kas_stack_bytes_per_tunnel,omitempty"`
	AgentStackBytesPerAgent float64 `json:"agent_stack_bytes_per_agent,omitempty"`
	AgentGoroutinesPerAgent float64 `json:"agent_goroutines_per_agent,omitempty"`
}

// WriteJSON writes s to dir/summary.json.
func (s *Summary) WriteJSON(dir string) error { return summaryfile.Write(dir, s) }

// ReadSummary reads dir/summary.json (or a file path) and checks its schema: the current one, v2 or v1.
func ReadSummary(path string) (*Summary, error) {
	var s Summary
	err := summaryfile.Read(path, SummarySchema, &s)
	if err == nil {
		return &s, nil
	}
	for _, old := range []string{SummarySchemaV2, SummarySchemaV1} {
		if summaryfile.Read(path, old, &s) == nil {
			return &s, nil
		}
	}
	return nil, err
}

// Failures lists what failed in the run, one line each: the failed cases with their errors by code,
// and the scale steps whose calls failed.
func (s *Summary) Failures() []string {
	var out []string
	for _, c := range s.Cases {
		if c.Failed {
			out = append(out, c.Name+": "+c.failureText())
		}
	}
	for _, sc := range s.Scale {
		if tooManyErrors(sc.Calls, sc.Errors, s.maxErrorRate()) {
			out = append(out, fmt.Sprintf("scale %d agents: %d of %d calls failed", sc.Agents, sc.Errors, sc.Calls))
		}
	}
	return out
}
