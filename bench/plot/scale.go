package plot

import (
	"github.com/tunnelbench/tunnelbench/bench"
)

// scaleChart draws values of the scale steps against the number of agents.
func scaleChart(s *bench.Summary, title, yLabel string, ss ...func(bench.ScaleResult) (string, float64)) (*Chart, error) {
	if len(s.Scale) == 0 {
		return nil, nil
	}
	xs := make([]float64, len(s.Scale))
	out := make([]series, len(ss))
	for i, sc := range s.Scale {
		xs[i] = float64(sc.Agents)
		for j, f := range ss {
			name, v := f(sc)
			out[j].name = name
			out[j].values = append(out[j].values, v)
		}
	}
	c := newChart(title, "agents", yLabel, 0)
	return c, lines(c, xs, out)
}

// ScaleHeap draws kas's and the agents' heap per tunnel against the number of agents.
func ScaleHeap(s *bench.Summary) (*Chart, error) {
	return scaleChart(s, "Heap per tunnel", "KiB per tunnel",
		func(r bench.ScaleResult) (string, float64) { return "kas", r.KasHeapBytesPerTunnel / 1024 },
		func(r bench.ScaleResult) (string, float64) { return "agents", r.AgentHeapBytesPerTunnel / 1024 })
}

// ScaleGoroutines draws kas's goroutines per tunnel against the number of agents.
func ScaleGoroutines(s *bench.Summary) (*Chart, error) {
	return scaleChart(s, "kas goroutines per tunnel", "goroutines per tunnel",
		func(r bench.ScaleResult) (string, float64) { return "kas", r.KasGoroutinesPerTunnel })
}

// ScaleConnect draws how long the agents took to connect all their tunnels against the number of
// agents.
func ScaleConnect(s *bench.Summary) (*Chart, error) {
	return scaleChart(s, "Time to connect every tunnel", "seconds",
		func(r bench.ScaleResult) (string, float64) { return "connect", r.ConnectS })
}
