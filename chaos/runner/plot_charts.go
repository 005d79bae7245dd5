package runner

import (
	"math"

	gplot "gonum.org/v1/plot"

	benchplot "github.com/tunnelbench/tunnelbench/bench/plot"
)

// plotPerSecond is one value per second of the timeline.
func plotPerSecond(s *Summary, name string, f func(Second) float64) plotSeries {
	sr := plotSeries{name: name, values: make([]float64, len(s.Timeline))}
	for i, sec := range s.Timeline {
		sr.values[i] = f(sec)
	}
	return sr
}

// plotLinear draws the series as steps on a linear axis from 0, or nothing when every value is 0 (or
// there is no timeline).
func plotLinear(s *Summary, title, yLabel string, ss ...plotSeries) (*benchplot.Chart, error) {
	if len(s.Timeline) == 0 {
		return nil, errPlotNothingToDraw
	}
	c, faults := plotTimeChart(s, title, yLabel)
	top, drawn, err := plotSteps(c, s, ss, plotAny)
	if err != nil {
		return nil, err
	}
	if top <= 0 {
		return nil, errPlotNothingToDraw
	}
	plotFinish(c, s, faults, top, drawn)
	return c, nil
}

// PlotLatency draws p50 and p99 of the calls that finished in each second, in milliseconds on a log
// scale; a second in which no call finished is a gap.
func PlotLatency(s *Summary) (*benchplot.Chart, error) {
	if len(s.Timeline) == 0 {
		return nil, errPlotNothingToDraw
	}
	latency := func(name string, f func(Second) int64) plotSeries {
		return plotPerSecond(s, name, func(sec Second) float64 {
			if sec.Achieved+reportFailedTotal(sec.ByCode) == 0 {
				return math.NaN()
			}
			return float64(f(sec)) / 1000
		})
	}
	c, faults := plotTimeChart(s, "Call latency per second (p50 and p99 of the calls that finished in it)", "latency (ms, log scale)")
	ss := []plotSeries{
		latency("p50", func(sec Second) int64 { return sec.LatencyUs.P50 }),
		latency("p99", func(sec Second) int64 { return sec.LatencyUs.P99 }),
	}
	top, drawn, err := plotSteps(c, s, ss, plotPositive)
	if err != nil {
		return nil, err
	}
	if drawn == 0 {
		return nil, errPlotNothingToDraw // a log axis without a positive value cannot be drawn
	}
	bottom := math.Inf(1)
	for _, sr := range ss {
		for _, v := range sr.values {
			if v > 0 && !math.IsInf(v, 0) {
				bottom = min(bottom, v)
			}
		}
	}
	share := plotLegendShare(c, drawn+len(faults.names))
	plotFinish(c, s, faults, top, drawn)
	c.Y.Scale = gplot.LogScale{}
	c.Y.Tick.Marker = gplot.LogTicks{Prec: -1}
	// From a power of ten, so that the axis has a label at its foot; room above for the legend, in
	// decades.
	c.Y.Min = math.Pow(10, math.Floor(math.Log10(bottom)))
	decades := max(math.Log10(top/c.Y.Min), 1)
	c.Y.Max = top * math.Pow(10, decades*share/(1-share))
	return c, nil
}

// PlotRate draws the calls offered (scheduled to start) each second, those achieved (finished and
// succeeded) and those that failed.
func PlotRate(s *Summary) (*benchplot.Chart, error) {
	return plotLinear(s, "Calls per second: offered, achieved (succeeded) and failed", "calls per second",
		plotPerSecond(s, "offered", func(sec Second) float64 { return float64(sec.Offered) }),
		plotPerSecond(s, "achieved", func(sec Second) float64 { return float64(sec.Achieved) }),
		plotPerSecond(s, "failed", func(sec Second) float64 { return float64(reportFailedTotal(sec.ByCode)) }))
}

// PlotErrors draws the failed calls of each second, one line per gRPC code (most failures first);
// nothing when no call failed.
func PlotErrors(s *Summary) (*benchplot.Chart, error) {
	total := map[string]int64{}
	for _, sec := range s.Timeline {
		for code, n := range sec.ByCode {
			total[code] += n
		}
	}
	var ss []plotSeries
	for _, code := range reportCodes(total) {
		ss = append(ss, plotPerSecond(s, code, func(sec Second) float64 { return float64(sec.ByCode[code]) }))
	}
	if len(ss) == 0 {
		return nil, errPlotNothingToDraw
	}
	return plotLinear(s, "Failed calls per second, by gRPC code", "failed calls per second", ss...)
}

// PlotTunnels draws the idle and busy tunnels, and the calls waiting for a tunnel, each second.
func PlotTunnels(s *Summary) (*benchplot.Chart, error) {
	return plotLinear(s, "Tunnels idle and busy, and calls waiting for a tunnel", "tunnels, calls",
		plotPerSecond(s, "tunnels idle", func(sec Second) float64 { return float64(sec.TunnelsIdle) }),
		plotPerSecond(s, "tunnels busy", func(sec Second) float64 { return float64(sec.TunnelsBusy) }),
		plotPerSecond(s, "calls waiting", func(sec Second) float64 { return float64(sec.WaitingCalls) }))
}

// PlotConnections draws the agent connections the kas instances accepted each second: a reconnect
// storm shows here. Nothing when there were none.
func PlotConnections(s *Summary) (*benchplot.Chart, error) {
	return plotLinear(s, "New agent connections per second (all kas)", "connections per second",
		plotPerSecond(s, "new connections", func(sec Second) float64 { return float64(sec.NewConnections) }))
}
