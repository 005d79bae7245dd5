package plot

import (
	"github.com/tunnelbench/tunnelbench/bench"
)

// Latency draws p50, p90 and p99 of every case, in microseconds on a log scale.
func Latency(s *bench.Summary) (*Chart, error) {
	if len(s.Cases) == 0 {
		return nil, nil
	}
	names := make([]string, len(s.Cases))
	p50, p90, p99 := series{name: "p50"}, series{name: "p90"}, series{name: "p99"}
	for i, c := range s.Cases {
		names[i] = c.Name
		p50.values = append(p50.values, float64(c.Latency.P50))
		p90.values = append(p90.values, float64(c.Latency.P90))
		p99.values = append(p99.values, float64(c.Latency.P99))
	}
	c := newChart("Latency per case", "", "latency (µs, log scale)", len(names))
	return c, points(c, names, []series{p50, p90, p99})
}
