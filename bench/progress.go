package bench

import "time"

// Progress is where a run is.
type Progress struct {
	Done, Total int
	Case        string
	Left        time.Duration
}

// progressReporter tells Options.Progress, when set, where a run is; Left counts every case left as a
// whole warm-up and duration.
type progressReporter struct {
	report  func(Progress)
	total   int
	perCase time.Duration
}

func newProgressReporter(opts Options, total int) progressReporter {
	return progressReporter{report: opts.Progress, total: total, perCase: opts.Warmup + opts.Duration}
}

// at says that done cases are over and what starts now.
func (p progressReporter) at(done int, what string) {
	if p.report != nil {
		p.report(Progress{Done: done, Total: p.total, Case: what, Left: time.Duration(p.total-done) * p.perCase})
	}
}

// finished says that every case is over.
func (p progressReporter) finished() {
	if p.report != nil {
		p.report(Progress{Done: p.total, Total: p.total})
	}
}

// caseCount is how many cases the run makes, for its progress.
func caseCount(groups []Group, withHTTP bool) int {
	total := 0
	for _, g := range groups {
		total += len(g.Paths) + len(g.Adapters)
	}
	if withHTTP {
		total += 3 // direct, tunnel and the proxy reference
	}
	return total
}
