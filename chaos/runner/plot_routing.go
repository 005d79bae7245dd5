package runner

import (
	"fmt"
	"math"
	"strings"

	benchplot "github.com/tunnelbench/tunnelbench/bench/plot"
)

// PlotRoutingSlowS are the routing durations, in seconds, above which PlotRouting counts a routing as
// slow: 16 ms and 64 ms, two of tunnel_routing_duration's bucket bounds, so the shares are counted,
// not estimated. (A bound the histogram lacks is replaced by the next larger one, and the legend says
// which.)
var PlotRoutingSlowS = []float64{0.016, 0.064}

// PlotRouting draws, per second, the share of routings slower than each of PlotRoutingSlowS, out of
// the routings that ended in that second. A routing that timed out counts as slow (the histogram
// holds successful routings only; without them a second in which every routing timed out would look
// fast); when some did, their own share is drawn too. A second without routings is a gap.
func PlotRouting(s *Summary) (*benchplot.Chart, error) {
	bounds := s.Routing.BucketBoundsS
	type threshold struct {
		name  string
		first int // the first bucket above the threshold
	}
	var ths []threshold
	var names []string
	for _, th := range PlotRoutingSlowS {
		for k, b := range bounds {
			if b >= th*(1-1e-9) {
				name := reportBound(b)
				ths = append(ths, threshold{name: "> " + name, first: k + 1})
				names = append(names, name)
				break
			}
		}
	}
	timeouts := false
	for _, sec := range s.Timeline {
		if len(sec.RoutingCounts) > 0 && len(sec.RoutingCounts) != len(bounds)+1 {
			return nil, fmt.Errorf("second %d: %d routing counts for %d bucket bounds, want %d", sec.T, len(sec.RoutingCounts), len(bounds), len(bounds)+1)
		}
		timeouts = timeouts || sec.RoutingTimeouts > 0
	}
	share := func(sec Second, from int, withTimeouts bool) float64 {
		var all, slow uint64
		for i, n := range sec.RoutingCounts {
			all += n
			if i >= from {
				slow += n
			}
		}
		t := uint64(max(sec.RoutingTimeouts, 0))
		if all+t == 0 {
			return math.NaN()
		}
		if withTimeouts {
			slow += t
		}
		return 100 * float64(slow) / float64(all+t)
	}
	var ss []plotSeries
	for _, th := range ths {
		ss = append(ss, plotPerSecond(s, th.name, func(sec Second) float64 { return share(sec, th.first, true) }))
	}
	if timeouts {
		ss = append(ss, plotPerSecond(s, "timed out", func(sec Second) float64 { return share(sec, math.MaxInt, true) }))
	}
	if len(ss) == 0 {
		return nil, errPlotNothingToDraw
	}
	title := "Slow routings per second: % of routings above " + strings.Join(names, " and ") + " (timeouts count as slow)"
	if len(names) == 0 {
		title = "Routings that timed out, per second (% of routings)"
	}
	c, faults := plotTimeChart(s, title, "% of the second's routings")
	top, drawn, err := plotSteps(c, s, ss, plotAny)
	if err != nil {
		return nil, err
	}
	if drawn == 0 {
		return nil, errPlotNothingToDraw
	}
	plotFinish(c, s, faults, top, drawn)
	return c, nil
}

// PlotRoutingHistogram draws the run's routing-duration histogram, each bucket as a share of the
// routings, with bench/plot's histogram chart.
func PlotRoutingHistogram(s *Summary) (*benchplot.Chart, error) {
	r := s.Routing
	var total uint64
	for _, n := range r.BucketCounts {
		total += n
	}
	if total == 0 || len(r.BucketBoundsS) == 0 {
		return nil, errPlotNothingToDraw
	}
	return benchplot.RoutingHistogram([]benchplot.RoutingBuckets{{Case: reportName(s), BoundsS: r.BucketBoundsS, Counts: r.BucketCounts}})
}
