package bench

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tunnelbench/tunnelbench/bench/routingstats"
)

// routingSnapshot is the routing histogram and timeout counter of some kas instances at one moment.
type routingSnapshot = routingstats.Sample

// snapshotRouting reads the successful-routing histogram and the timeout counter, summed over the kas
// instances' metrics.
func snapshotRouting(gatherers []prometheus.Gatherer) routingSnapshot {
	return routingstats.Take(gatherers)
}

// routingAcc adds up the routing histogram over several intervals.
type routingAcc struct{ routingstats.Total }

// addRouting adds what happened between two snapshots to acc (nil starts a new one).
func addRouting(acc *routingAcc, before, after routingSnapshot) *routingAcc {
	if acc == nil {
		acc = &routingAcc{}
	}
	acc.Add(before, after)
	return acc
}

// finish turns the accumulated histogram into the reported figures.
func (a *routingAcc) finish() *Routing {
	r := &Routing{Timeouts: int64(a.Timeouts)}
	if a.Counts != nil {
		r.P50us = a.Quantile(0.50) * 1e6
		r.P99us = a.Quantile(0.99) * 1e6
		r.BucketBoundsS, r.BucketCounts = a.PerBucket()
	}
	return r
}

type labelPair interface {
	GetName() string
	GetValue() string
}

func hasLabel[L labelPair](ls []L, name, value string) bool {
	for _, l := range ls {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
