package runner

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/chaos"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
)

// testbed is what a run starts, loads, faults and samples: this project's topology of kas and agents
// (topology), or another tunnel's server and agents through its bench/tunnels adapter (adapterBed).
type testbed interface {
	// Target is what process faults act on.
	chaos.Target
	// linkProxies returns the proxies of link that sel picks.
	linkProxies(link chaos.Link, sel chaos.Select) ([]*chaos.Proxy, error)
	// stats sums the tunnels and waiting calls of the live kas; zero without kas.
	stats() registry.Stats
	// gatherers are the metrics of every kas; none without kas.
	gatherers() []prometheus.Gatherer
	// acceptTimes is when agent connections were made, the topology's first ones included.
	acceptTimes() []time.Time
	// aliveKas lists the entries of newCalls that callers can enter at now.
	aliveKas() []int
	// newCalls is the call factory of each entry (a kas); a call goes to the agent its context names
	// (agentKey).
	newCalls(shape load.Shape, payload int) []load.NewCall
	// close stops everything the testbed started; the error says what did not stop.
	close() error
}

var _ testbed = (*topology)(nil)

func (t *topology) linkProxies(link chaos.Link, sel chaos.Select) ([]*chaos.Proxy, error) {
	return t.proxies.Select(link, sel)
}

func (t *topology) acceptTimes() []time.Time { return t.accepts.snapshot() }

// newCalls enters at kas i's public API, through its caller->kas proxy, with the call's agent in kas's
// routing metadata.
func (t *topology) newCalls(shape load.Shape, payload int) []load.NewCall {
	var out []load.NewCall
	for _, c := range t.callers {
		out = append(out, load.NewShapeCall(shape, payload, c, agentMeta))
	}
	return out
}
