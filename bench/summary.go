package bench

import (
	"fmt"

	"github.com/tunnelbench/tunnelbench/bench/result"
	"github.com/tunnelbench/tunnelbench/internal/summaryfile"
)

// SummarySchema names the format of summary.json. Scripts depend on it: change it only with a new version.
//
// v2 changed the meaning of calls_per_s and bytes_per_s (successful calls only; v1 counted failed calls
// too) and added settings, failed cases and rounds; ReadSummary still reads v1 (SummarySchemaV1).
const SummarySchema = "tunnelbench/bench/v2"

// SummarySchemaV1 is the first format, still read (results/baseline may hold one) but never written.
const SummarySchemaV1 = "tunnelbench/bench/v1"

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
}

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
}

// WriteJSON writes s to dir/summary.json.
func (s *Summary) WriteJSON(dir string) error { return summaryfile.Write(dir, s) }

// ReadSummary reads dir/summary.json (or a file path) and checks its schema: the current one or v1.
func ReadSummary(path string) (*Summary, error) {
	var s Summary
	err := summaryfile.Read(path, SummarySchema, &s)
	if err != nil && summaryfile.Read(path, SummarySchemaV1, &s) == nil {
		return &s, nil
	}
	if err != nil {
		return nil, err
	}
	return &s, nil
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
