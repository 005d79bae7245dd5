package routingstats

import (
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
)

// Exponential is a base-2 exponential histogram as Prometheus's native histograms hold it: bucket i
// counts the values in (2^((i-1)/2^Schema), 2^(i/2^Schema)], so each bucket is 2^(2^-Schema) wide and a
// value read from it is off by less than that factor, whatever the value. kas keeps its routing
// durations so (ExponentialMetric) beside the 1 ms-first buckets of DurationMetric.
type Exponential struct {
	Schema int32
	// ZeroCount counts the values at or below ZeroThreshold (OpenTelemetry's threshold is 0).
	ZeroCount     uint64
	ZeroThreshold float64
	// Counts by bucket index, not cumulative; a missing index is an empty bucket.
	Counts map[int]uint64
}

// exponentialOf reads a native histogram's positive buckets; nil for a classic histogram.
func exponentialOf(h *dto.Histogram) *Exponential {
	if h.Schema == nil {
		return nil
	}
	e := &Exponential{Schema: h.GetSchema(), ZeroCount: h.GetZeroCount(), ZeroThreshold: h.GetZeroThreshold(), Counts: map[int]uint64{}}
	// Integer histograms send deltas between buckets, float histograms absolute counts.
	deltas, floats := h.GetPositiveDelta(), h.GetPositiveCount()
	k, count := 0, int64(0)
	idx := 0
	for _, span := range h.GetPositiveSpan() {
		idx += int(span.GetOffset())
		for range span.GetLength() {
			var c uint64
			switch {
			case k < len(deltas):
				count += deltas[k]
				c = uint64(max(count, 0))
			case k < len(floats):
				c = uint64(max(floats[k], 0))
			}
			if c > 0 {
				e.Counts[idx] += c
			}
			k++
			idx++
		}
	}
	return e
}

// Total is the number of values the histogram holds.
func (e *Exponential) Total() uint64 {
	n := e.ZeroCount
	for _, c := range e.Counts {
		n += c
	}
	return n
}

// RelativeError bounds how far a value read from one bucket can be from a value in it: the bucket's
// width as a ratio, less one.
func (e *Exponential) RelativeError() float64 {
	return math.Exp2(math.Exp2(-float64(e.Schema))) - 1
}

// downscaled returns e at a coarser schema (each bucket merges 2^(Schema-schema) of e's); e itself when
// schema is not coarser.
func (e *Exponential) downscaled(schema int32) *Exponential {
	if schema >= e.Schema {
		return e
	}
	d := uint(e.Schema - schema)
	out := &Exponential{Schema: schema, ZeroCount: e.ZeroCount, ZeroThreshold: e.ZeroThreshold, Counts: make(map[int]uint64, len(e.Counts))}
	for i, c := range e.Counts {
		// Buckets are indexed by their upper bound: (i-1)>>d+1 is the coarse bucket holding fine bucket i
		// (the shift floors for negative indexes too).
		out.Counts[(i-1)>>d+1] += c
	}
	return out
}

// add adds o to e, at the coarser of their schemas.
func (e *Exponential) add(o *Exponential) {
	e.combine(o, func(a, b uint64) uint64 { return a + b })
}

// sub takes o (an earlier reading of the same counters) from e, at the coarser of their schemas. A
// bucket that went down (a kas that restarted or left) counts as empty, never negative.
func (e *Exponential) sub(o *Exponential) {
	e.combine(o, func(a, b uint64) uint64 {
		if b > a {
			return 0
		}
		return a - b
	})
}

func (e *Exponential) combine(o *Exponential, f func(a, b uint64) uint64) {
	schema := min(e.Schema, o.Schema)
	*e = *e.downscaled(schema)
	o = o.downscaled(schema)
	idx := make(map[int]bool, len(e.Counts)+len(o.Counts))
	for i := range e.Counts {
		idx[i] = true
	}
	for i := range o.Counts {
		idx[i] = true
	}
	counts := make(map[int]uint64, len(idx))
	for i := range idx {
		if c := f(e.Counts[i], o.Counts[i]); c > 0 {
			counts[i] = c
		}
	}
	e.Counts = counts
	e.ZeroCount = f(e.ZeroCount, o.ZeroCount)
	e.ZeroThreshold = max(e.ZeroThreshold, o.ZeroThreshold)
}

// clone is a deep copy.
func (e *Exponential) clone() *Exponential {
	c := *e
	c.Counts = make(map[int]uint64, len(e.Counts))
	for i, n := range e.Counts {
		c.Counts[i] = n
	}
	return &c
}

// Quantile estimates quantile q (0..1): the bucket holding the rank, interpolated geometrically inside
// it (the buckets are geometric), so within RelativeError of a value in that bucket; 0 when empty.
func (e *Exponential) Quantile(q float64) float64 {
	total := e.Total()
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	if rank <= float64(e.ZeroCount) {
		return e.ZeroThreshold
	}
	idx := make([]int, 0, len(e.Counts))
	for i := range e.Counts {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	width := math.Exp2(-float64(e.Schema))
	prev := float64(e.ZeroCount)
	for _, i := range idx {
		c := float64(e.Counts[i])
		if prev+c >= rank {
			lower := math.Exp2(float64(i-1) * width)
			return lower * math.Exp2(width*(rank-prev)/c)
		}
		prev += c
	}
	return math.Exp2(float64(idx[len(idx)-1]) * width)
}
