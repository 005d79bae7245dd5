package plot

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tunnelbench/tunnelbench/bench"
)

// RoutingBuckets is one case's tunnel_routing_duration histogram: Counts[i] routings took at most
// BoundsS[i] seconds (and more than the bound before); the last count, one more than the bounds, is
// for routings above the last bound. Counts are per bucket, not cumulative.
type RoutingBuckets struct {
	Case    string
	BoundsS []float64
	Counts  []uint64
}

// RoutingHistogram draws the routing-duration histograms of some cases side by side, each bucket as
// the share of that case's routings, so that cases with different call counts compare.
func RoutingHistogram(cases []RoutingBuckets) (*Chart, error) {
	if len(cases) == 0 {
		return nil, nil
	}
	bounds := cases[0].BoundsS
	var names []string
	for i, b := range bounds {
		if i == 0 {
			names = append(names, "≤ "+seconds(b))
		} else {
			names = append(names, seconds(bounds[i-1])+" – "+seconds(b))
		}
	}
	names = append(names, "> "+seconds(bounds[len(bounds)-1]))
	ss := make([]series, 0, len(cases))
	for _, c := range cases {
		if len(c.BoundsS) != len(bounds) || len(c.Counts) != len(bounds)+1 {
			return nil, fmt.Errorf("routing histogram of %s: %d bounds and %d counts, want %d and %d", c.Case, len(c.BoundsS), len(c.Counts), len(bounds), len(bounds)+1)
		}
		var total uint64
		for _, n := range c.Counts {
			total += n
		}
		s := series{name: c.Case}
		for _, n := range c.Counts {
			share := 0.0
			if total > 0 {
				share = 100 * float64(n) / float64(total)
			}
			s.values = append(s.values, share)
		}
		ss = append(ss, s)
	}
	c := newChart("Routing duration histogram", "routing duration", "% of routings", len(names))
	return c, bars(c, names, ss)
}

// seconds writes a bucket bound the short way: 0.001 → 1ms, 4.096 → 4.096s.
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < time.Second {
		return strconv.FormatFloat(s*1000, 'f', -1, 64) + "ms"
	}
	return strconv.FormatFloat(s, 'f', -1, 64) + "s"
}

// RoutingHistogramOf draws the routing histograms of the summary's tunneled cases at the highest
// concurrency (one bar group per case would be unreadable across the whole matrix).
func RoutingHistogramOf(s *bench.Summary) (*Chart, error) {
	top := 0
	for _, c := range s.Cases {
		if c.Routing != nil && len(c.Routing.BucketCounts) > 0 {
			top = max(top, c.Concurrency)
		}
	}
	var cases []RoutingBuckets
	for _, c := range s.Cases {
		if c.Routing == nil || len(c.Routing.BucketCounts) == 0 || c.Concurrency != top {
			continue
		}
		cases = append(cases, RoutingBuckets{Case: c.Name, BoundsS: c.Routing.BucketBoundsS, Counts: c.Routing.BucketCounts})
	}
	return RoutingHistogram(cases)
}
