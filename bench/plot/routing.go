package plot

import (
	"github.com/tunnelbench/tunnelbench/bench"
)

// Routing draws the routing kas's p50 and p99 routing duration (from the tunnel_routing_duration
// histogram) per tunneled case, in microseconds on a log scale. The summary holds these two estimates
// only, not the histogram's buckets.
func Routing(s *bench.Summary) (*Chart, error) {
	var names []string
	p50, p99 := series{name: "routing p50"}, series{name: "routing p99"}
	for _, c := range s.Cases {
		if c.Routing == nil {
			continue
		}
		names = append(names, c.Name)
		p50.values = append(p50.values, c.Routing.P50us)
		p99.values = append(p99.values, c.Routing.P99us)
	}
	if len(names) == 0 {
		return nil, nil
	}
	c := newChart("Routing duration per case (estimated from histogram buckets)", "", "routing duration (µs, log scale)", len(names))
	return c, points(c, names, []series{p50, p99})
}
