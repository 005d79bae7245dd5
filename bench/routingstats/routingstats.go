// Package routingstats reads kas's routing metrics, summed over kas instances, as samples whose
// differences are what happened between them: the tunnel_routing_duration_seconds histogram of
// successful routings (buckets from 1 ms, a contract of the seed), its exponential twin
// tunnel_routing_duration_exponential_seconds (buckets a few percent wide, which bench's percentiles
// come from), and the tunnel_routing_timeout_total counter. Bench's cases and the chaos runner's
// timeline both report routing with it.
//
// It only reads metrics; it never registers or serves any.
package routingstats

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric names it reads, as kas exposes them.
const (
	DurationMetric    = "tunnel_routing_duration_seconds"
	ExponentialMetric = "tunnel_routing_duration_exponential_seconds"
	TimeoutsMetric    = "tunnel_routing_timeout_total"
)

// Sample is the successful-routing histogram and the timeout counter of some kas instances at one
// moment.
type Sample struct {
	// Bounds are the buckets' upper bounds in seconds (+Inf last) and Counts their cumulative counts;
	// both are nil when no kas has the histogram yet.
	Bounds   []float64
	Counts   []uint64
	Timeouts float64
	// Exp is the successful routings' exponential histogram, nil unless every kas that has the
	// bucketed histogram also serves the exponential one (a kas of an older version, or a scrape in
	// the text format, does not): figures from some kas only would pass for all of them.
	Exp *Exponential
}

// Take reads the routing metrics of the kas instances behind gatherers. A gatherer that fails is left
// out.
func Take(gatherers []prometheus.Gatherer) Sample {
	var s Sample
	withBuckets, withExp := 0, 0
	for _, g := range gatherers {
		fams, err := g.Gather()
		if err != nil {
			continue
		}
		hasBuckets, hasExp := false, false
		for _, f := range fams {
			switch f.GetName() {
			case TimeoutsMetric:
				for _, m := range f.GetMetric() {
					s.Timeouts += m.GetCounter().GetValue()
				}
			case DurationMetric:
				for _, m := range f.GetMetric() {
					if successful(m) {
						s.addHistogram(m.GetHistogram())
						hasBuckets = true
					}
				}
			case ExponentialMetric:
				for _, m := range f.GetMetric() {
					if e := exponentialOf(m.GetHistogram()); e != nil && successful(m) {
						s.addExponential(e)
						hasExp = true
					}
				}
			}
		}
		if hasBuckets {
			withBuckets++
		}
		if hasBuckets && hasExp {
			withExp++
		}
	}
	if withExp < withBuckets {
		s.Exp = nil
	}
	return s
}

func (s *Sample) addExponential(e *Exponential) {
	if s.Exp == nil {
		s.Exp = e.clone()
		return
	}
	s.Exp.add(e)
}

func successful(m *dto.Metric) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == "status" && l.GetValue() == "success" {
			return true
		}
	}
	return false
}

// addHistogram adds one kas's histogram; the first sets the bounds.
func (s *Sample) addHistogram(h *dto.Histogram) {
	var bs []*dto.Bucket
	for _, b := range h.GetBucket() {
		// Scraped text has an explicit +Inf bucket; a registry's Gather has none.
		if !math.IsInf(b.GetUpperBound(), 1) {
			bs = append(bs, b)
		}
	}
	if s.Bounds == nil {
		for _, b := range bs {
			s.Bounds = append(s.Bounds, b.GetUpperBound())
		}
		s.Bounds = append(s.Bounds, math.Inf(1))
		s.Counts = make([]uint64, len(s.Bounds))
	}
	for i, b := range bs {
		if i < len(s.Counts)-1 {
			s.Counts[i] += b.GetCumulativeCount()
		}
	}
	s.Counts[len(s.Counts)-1] += h.GetSampleCount()
}

// Since returns what happened from earlier to s: the histogram's finite bounds (seconds), its increase
// per bucket (one more than the bounds: the last is above the last bound) and the timeouts.
func (s Sample) Since(earlier Sample) (boundsS []float64, counts []uint64, timeouts int64) {
	var t Total
	t.Add(earlier, s)
	boundsS, counts = t.PerBucket()
	return boundsS, counts, int64(t.Timeouts)
}

// Total adds up the routing histograms and timeouts over several intervals.
type Total struct {
	// Bounds (+Inf last) and cumulative Counts, as in Sample; nil until an interval had the histogram.
	Bounds   []float64
	Counts   []uint64
	Timeouts float64
	// Exp is the exponential histogram's increase, nil when an interval lacked it at either end.
	Exp *Exponential
	// noExp: an interval had the bucketed histogram but not the exponential one, so Exp misses its
	// routings.
	noExp bool
}

// Add adds what happened between two samples.
func (t *Total) Add(before, after Sample) {
	t.Timeouts += after.Timeouts - before.Timeouts
	if after.Bounds == nil {
		return
	}
	t.addExponential(before, after)
	if t.Counts == nil {
		t.Bounds = after.Bounds
		t.Counts = make([]uint64, len(after.Counts))
	}
	for i := range after.Counts {
		d := after.Counts[i]
		if before.Counts != nil {
			d -= before.Counts[i]
		}
		t.Counts[i] += d
	}
}

func (t *Total) addExponential(before, after Sample) {
	// A histogram that appeared during the interval started from nothing; one that disappeared lost
	// what it had, which no difference can tell.
	if t.noExp || after.Exp == nil || (before.Exp == nil && before.Bounds != nil) {
		t.noExp, t.Exp = true, nil
		return
	}
	d := after.Exp.clone()
	if before.Exp != nil {
		d.sub(before.Exp)
	}
	if t.Exp == nil {
		t.Exp = d
		return
	}
	t.Exp.add(d)
}

// PerBucket returns the finite bounds (seconds) and the count of each bucket (not cumulative), one more
// than the bounds: the last is above the last bound. Both are nil without a histogram.
func (t *Total) PerBucket() (boundsS []float64, counts []uint64) {
	if t.Counts == nil {
		return nil, nil
	}
	prev := uint64(0)
	for _, c := range t.Counts {
		counts = append(counts, c-prev)
		prev = c
	}
	return t.Bounds[:len(t.Bounds)-1], counts
}

// Quantile estimates quantile q (0..1) in seconds from the total: from the exponential histogram when
// every interval had it (within its RelativeError), from the buckets otherwise, as Prometheus's
// histogram_quantile does; 0 without a histogram.
func (t *Total) Quantile(q float64) float64 {
	if e := t.Exponential(); e != nil {
		return e.Quantile(q)
	}
	if t.Counts == nil {
		return 0
	}
	return cumulativeQuantile(q, t.Bounds, t.Counts)
}

// Exponential is the exponential histogram that Quantile reads, or nil when Quantile reads the
// buckets (some interval lacked it, at either end). Its count may differ from the buckets' by the
// routings being recorded while a kas was read: the two are not recorded at once.
func (t *Total) Exponential() *Exponential {
	if t.noExp || t.Exp == nil || t.Exp.Total() == 0 {
		return nil
	}
	return t.Exp
}

// Source names the metric that Quantile reads and bounds its relative error (0 for the buckets, whose
// error depends on where values fall in them); "" without a histogram.
func (t *Total) Source() (metric string, relErr float64) {
	if e := t.Exponential(); e != nil {
		return ExponentialMetric, e.RelativeError()
	}
	if t.Counts == nil {
		return "", 0
	}
	return DurationMetric, 0
}

// cumulativeQuantile estimates quantile q from cumulative bucket counts as Prometheus's
// histogram_quantile does: linear interpolation inside the bucket that holds the rank. Buckets are
// coarse (×4 apart), so this is an estimate, reported as such.
func cumulativeQuantile(q float64, bounds []float64, cumulative []uint64) float64 {
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

// BucketQuantile estimates quantile q (0..1) in seconds from per-bucket counts (as PerBucket returns
// them), as Prometheus's histogram_quantile does.
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
	return cumulativeQuantile(q, bounds, cum)
}
