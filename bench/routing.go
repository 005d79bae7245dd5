package bench

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// routingSnapshot is the routing histogram and timeout counter of some kas instances at one moment.
type routingSnapshot struct {
	// bounds are the buckets' upper bounds in seconds (+Inf last); counts are cumulative.
	bounds   []float64
	counts   []uint64
	timeouts float64
}

// snapshotRouting reads the successful-routing histogram and the timeout counter, summed over the kas
// instances' metrics.
func snapshotRouting(gatherers []prometheus.Gatherer) routingSnapshot {
	var s routingSnapshot
	for _, g := range gatherers {
		fams, err := g.Gather()
		if err != nil {
			continue
		}
		for _, f := range fams {
			switch f.GetName() {
			case "tunnel_routing_timeout_total":
				for _, m := range f.GetMetric() {
					s.timeouts += m.GetCounter().GetValue()
				}
			case "tunnel_routing_duration_seconds":
				for _, m := range f.GetMetric() {
					if !hasLabel(m.GetLabel(), "status", "success") {
						continue
					}
					var bs []*dto.Bucket
					for _, b := range m.GetHistogram().GetBucket() {
						// Scraped text has an explicit +Inf bucket; a registry's Gather has none.
						if !math.IsInf(b.GetUpperBound(), 1) {
							bs = append(bs, b)
						}
					}
					if s.bounds == nil {
						for _, b := range bs {
							s.bounds = append(s.bounds, b.GetUpperBound())
						}
						s.bounds = append(s.bounds, math.Inf(1))
						s.counts = make([]uint64, len(s.bounds))
					}
					for i, b := range bs {
						if i < len(s.counts)-1 {
							s.counts[i] += b.GetCumulativeCount()
						}
					}
					s.counts[len(s.counts)-1] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return s
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

// routingAcc adds up the routing histogram over several intervals.
type routingAcc struct {
	bounds   []float64
	counts   []uint64
	timeouts float64
}

// addRouting adds what happened between two snapshots to acc (nil starts a new one).
func addRouting(acc *routingAcc, before, after routingSnapshot) *routingAcc {
	if acc == nil {
		acc = &routingAcc{}
	}
	acc.timeouts += after.timeouts - before.timeouts
	if after.bounds == nil {
		return acc
	}
	if acc.counts == nil {
		acc.bounds = after.bounds
		acc.counts = make([]uint64, len(after.counts))
	}
	for i := range after.counts {
		d := after.counts[i]
		if before.counts != nil {
			d -= before.counts[i]
		}
		acc.counts[i] += d
	}
	return acc
}

// finish turns the accumulated histogram into the reported figures.
func (a *routingAcc) finish() *Routing {
	r := &Routing{Timeouts: int64(a.timeouts)}
	if a.counts != nil {
		r.P50us = bucketQuantile(0.50, a.bounds, a.counts) * 1e6
		r.P99us = bucketQuantile(0.99, a.bounds, a.counts) * 1e6
		r.BucketBoundsS = a.bounds[:len(a.bounds)-1] // the last bound is +Inf
		prev := uint64(0)
		for _, c := range a.counts {
			r.BucketCounts = append(r.BucketCounts, c-prev)
			prev = c
		}
	}
	return r
}

// bucketQuantile estimates quantile q from cumulative bucket counts as Prometheus's histogram_quantile
// does: linear interpolation inside the bucket that holds the rank. Buckets are coarse (×4 apart), so
// this is an estimate, reported as such.
func bucketQuantile(q float64, bounds []float64, cumulative []uint64) float64 {
	total := cumulative[len(cumulative)-1]
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	lower, prev := 0.0, uint64(0)
	for i, c := range cumulative {
		if float64(c) >= rank {
			upper := bounds[i]
			if math.IsInf(upper, 1) {
				return lower
			}
			in := c - prev
			if in == 0 {
				return upper
			}
			return lower + (upper-lower)*(rank-float64(prev))/float64(in)
		}
		lower, prev = bounds[i], c
	}
	return lower
}

// RoutingSample is the successful-routing histogram and the timeout counter of some kas instances at one
// moment. Two samples give what happened between them.
type RoutingSample struct{ s routingSnapshot }

// SampleRouting reads the routing metrics of the kas instances behind gatherers.
func SampleRouting(gatherers []prometheus.Gatherer) RoutingSample {
	return RoutingSample{s: snapshotRouting(gatherers)}
}

// Since returns what happened from earlier to r: the histogram's finite bounds (seconds), its increase
// per bucket (one more than the bounds: the last is above the last bound) and the timeouts.
func (r RoutingSample) Since(earlier RoutingSample) (boundsS []float64, counts []uint64, timeouts int64) {
	acc := addRouting(nil, earlier.s, r.s)
	if acc.counts == nil {
		return nil, nil, int64(acc.timeouts)
	}
	prev := uint64(0)
	for _, c := range acc.counts {
		counts = append(counts, c-prev)
		prev = c
	}
	return acc.bounds[:len(acc.bounds)-1], counts, int64(acc.timeouts)
}

// BucketQuantile estimates quantile q (0..1) in seconds from per-bucket counts, as Prometheus's
// histogram_quantile does.
func BucketQuantile(q float64, boundsS []float64, counts []uint64) float64 {
	if len(counts) == 0 {
		return 0
	}
	bounds := append(append([]float64(nil), boundsS...), math.Inf(1))
	cum := make([]uint64, len(counts))
	var sum uint64
	for i, c := range counts {
		sum += c
		cum[i] = sum
	}
	return bucketQuantile(q, bounds, cum)
}
