package bench

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tunnelbench/tunnelbench/bench/routingstats"
)

// routingSnapshot is the routing histograms and timeout counter of some kas instances at one moment.
type routingSnapshot = routingstats.Sample

// snapshotRouting reads the successful-routing histograms and the timeout counter, summed over the kas
// instances' metrics.
func snapshotRouting(gatherers []prometheus.Gatherer) routingSnapshot {
	return routingstats.Take(gatherers)
}

// routingAcc adds up the routing histograms over several intervals.
type routingAcc struct{ routingstats.Total }

// addRouting adds what happened between two snapshots to acc (nil starts a new one).
func addRouting(acc *routingAcc, before, after routingSnapshot) *routingAcc {
	if acc == nil {
		acc = &routingAcc{}
	}
	acc.Add(before, after)
	return acc
}

// finish turns the accumulated histograms into the reported figures: percentiles from the exponential
// histogram when every kas served it, the seed's buckets (kept for the plots) in any case.
func (a *routingAcc) finish() *Routing {
	r := &Routing{Timeouts: int64(a.Timeouts)}
	if a.Counts != nil {
		r.P50us = a.Quantile(0.50) * 1e6
		r.P99us = a.Quantile(0.99) * 1e6
		r.BucketBoundsS, r.BucketCounts = a.PerBucket()
		var relErr float64
		r.Source, relErr = a.Source()
		r.ResolutionPct = relErr * 100
	}
	return r
}

// writeRoutingNote says in report.md where the routing columns come from, so that a figure read from
// 1 ms-wide buckets is never taken for a measurement. Summaries written before Routing.Source get no
// note.
func writeRoutingNote(b *strings.Builder, s *Summary) {
	exp, buckets, worst := 0, 0, 0.0
	for _, c := range s.Cases {
		switch {
		case c.Routing == nil:
		case c.Routing.Source == routingstats.ExponentialMetric:
			exp++
			worst = max(worst, c.Routing.ResolutionPct)
		case c.Routing.Source == routingstats.DurationMetric:
			buckets++
		}
	}
	if exp > 0 {
		fmt.Fprintf(b, "\nRouting percentiles (`routing p99 µs`) are the routing kas's time to find a tunnel, from its exponential histogram `%s`: each is within %.1f%% of a routing's real duration.\n", routingstats.ExponentialMetric, worst)
	}
	if buckets > 0 {
		n := fmt.Sprintf("%d cases", buckets)
		if buckets == 1 {
			n = "one case"
		}
		fmt.Fprintf(b, "\nThe routing percentiles of %s come from `%s`'s buckets (a kas without `%s`): interpolated between 0, 1 ms, 4 ms, …, they say little below 1 ms.\n", n, routingstats.DurationMetric, routingstats.ExponentialMetric)
	}
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
