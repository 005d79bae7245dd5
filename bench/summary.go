package bench

import (
	"github.com/tunnelbench/tunnelbench/bench/result"
	"github.com/tunnelbench/tunnelbench/internal/summaryfile"
)

// SummarySchema names the format of summary.json. Scripts depend on it: change it only with a new version.
const SummarySchema = "tunnelbench/bench/v1"

// Summary is summary.json.
type Summary struct {
	Schema string        `json:"schema"`
	Env    Env           `json:"env"`
	Cases  []CaseResult  `json:"cases"`
	Scale  []ScaleResult `json:"scale"`
	// MergedFrom lists the runs that tunnelbench merge combined into this summary.
	MergedFrom []MergedRun `json:"merged_from,omitempty"`
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

// ReadSummary reads dir/summary.json (or a file path) and checks its schema.
func ReadSummary(path string) (*Summary, error) {
	var s Summary
	if err := summaryfile.Read(path, SummarySchema, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
