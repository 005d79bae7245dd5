package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/bench/result"
)

// MergeInput is one run for Merge: its summary and the directory (or file) it was read from, which
// messages name.
type MergeInput struct {
	Dir     string
	Summary *Summary
}

// MergedRun is one of the runs a merged summary combines.
type MergedRun struct {
	Dir string `json:"dir"`
	Env Env    `json:"env"`
	// TimedS is the run's timed load, summed over its cases (calls ÷ calls/s): how long the runs had to
	// overlap for their throughputs to add up.
	TimedS float64 `json:"timed_s"`
}

// MergeStartSkew is how far apart runs may start before MergeWarnings says so, besides a tenth of
// their timed load: load hosts started by hand are seconds apart.
const MergeStartSkew = 30 * time.Second

// Merge combines the summaries of one matrix run at the same time from several load hosts against the
// same target: per case, the latency histograms merged (percentiles of the union of every host's
// calls, never an average of percentiles), calls, errors and throughputs summed, allocations per call
// weighted by calls, ratios to direct recomputed. Routing figures (the kas's view, which each host
// read for itself) and scale steps (one machine's) are not merged: they stay in each run's report.
//
// It refuses, naming the runs and what differs, fewer than two runs, runs of different matrices or
// settings, a run given twice, an already merged run, and cases without their latency histogram
// (summaries written before latency_hdr).
func Merge(runs []MergeInput) (*Summary, error) {
	if len(runs) < 2 {
		return nil, fmt.Errorf("merge needs at least two runs, got %d", len(runs))
	}
	hists := make([]map[string]*hdrhistogram.Histogram, len(runs))
	// What is wrong with one file first, then how two differ.
	for i, r := range runs {
		if err := mergeable(r); err != nil {
			return nil, err
		}
		h, err := caseHistograms(r)
		if err != nil {
			return nil, err
		}
		hists[i] = h
	}
	for i, r := range runs {
		for _, prev := range runs[:i] {
			if filepath.Clean(prev.Dir) == filepath.Clean(r.Dir) || sameSummary(prev.Summary, r.Summary) {
				return nil, fmt.Errorf("%s and %s are the same run: it would count twice", prev.Dir, r.Dir)
			}
		}
		if i > 0 {
			if err := sameRun(runs[0], r); err != nil {
				return nil, err
			}
		}
	}
	first := runs[0].Summary
	out := &Summary{Schema: SummarySchema, Env: first.Env, Settings: first.Settings, Tunnels: mergeTunnels(runs)}
	for _, r := range runs {
		out.MergedFrom = append(out.MergedFrom, MergedRun{Dir: r.Dir, Env: r.Summary.Env, TimedS: timedSeconds(r.Summary)})
		if r.Summary.Env.StartedAt.Before(out.Env.StartedAt) {
			out.Env.StartedAt = r.Summary.Env.StartedAt
		}
	}
	for _, c := range first.Cases {
		merged, err := mergeCase(c.Name, runs, hists)
		if err != nil {
			return nil, err
		}
		out.Cases = append(out.Cases, merged)
	}
	for i := range out.Cases {
		c := &out.Cases[i]
		if c.Pair == "" {
			continue
		}
		if d := out.caseNamed(c.Pair); d != nil && !c.Stalled() && !d.Stalled() {
			c.RatioToDirect = ratio(c, d)
		}
	}
	return out, nil
}

// mergeable says why a run cannot be merged at all.
func mergeable(r MergeInput) error {
	if len(r.Summary.MergedFrom) > 0 {
		return fmt.Errorf("%s is already a merge of %d runs: merge the runs themselves", r.Dir, len(r.Summary.MergedFrom))
	}
	if len(r.Summary.Cases) == 0 {
		return fmt.Errorf("%s has no cases to merge", r.Dir)
	}
	return nil
}

// sameRun says how run r differs from run a in matrix or settings, or nil.
func sameRun(a, r MergeInput) error {
	differ := func(what string, x, y any) error {
		return fmt.Errorf("%s and %s ran with different settings: %s %v vs %v", a.Dir, r.Dir, what, x, y)
	}
	ea, er := a.Summary.Env, r.Summary.Env
	if ea.Quick != er.Quick {
		return differ("quick", ea.Quick, er.Quick)
	}
	if ea.Target != er.Target {
		return differ("target", quoted(ea.Target), quoted(er.Target))
	}
	if k, x, y := otherFields(a.Summary, r.Summary); k != "" {
		return differ(k, x, y)
	}
	if ta, tr := tunnelNames(a.Summary), tunnelNames(r.Summary); !slices.Equal(ta, tr) {
		return differ("tunnels", strings.Join(ta, ","), strings.Join(tr, ","))
	}
	na, nr := caseNames(a.Summary), caseNames(r.Summary)
	if onlyA, onlyR := missing(na, nr), missing(nr, na); len(onlyA)+len(onlyR) > 0 {
		return fmt.Errorf("%s and %s are runs of different matrices: cases only in the first: %s; only in the second: %s", a.Dir, r.Dir, listSome(onlyA), listSome(onlyR))
	}
	for _, ca := range a.Summary.Cases {
		cr := r.Summary.caseNamed(ca.Name)
		if ca.Mode != cr.Mode {
			return differ("case "+ca.Name+" mode", ca.Mode, cr.Mode)
		}
		if ca.Pair != cr.Pair {
			return differ("case "+ca.Name+" direct pair", quoted(ca.Pair), quoted(cr.Pair))
		}
	}
	return nil
}

// otherFields compares the summaries' top-level fields that Merge does not know by name (run settings
// that later versions record there), and returns the first that differs.
func otherFields(a, b *Summary) (key string, x, y string) {
	fa, fb := topFields(a), topFields(b)
	for _, k := range slices.Sorted(maps.Keys(fa)) {
		if !bytes.Equal(fa[k], fb[k]) {
			return k, string(fa[k]), string(fb[k])
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			return k, "(none)", string(fb[k])
		}
	}
	return "", "", ""
}

func topFields(s *Summary) map[string]json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil
	}
	for _, k := range []string{"schema", "env", "cases", "scale", "merged_from", "tunnels"} {
		delete(m, k)
	}
	return m
}

func quoted(s string) string {
	if s == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", s)
}

func tunnelNames(s *Summary) []string {
	names := make([]string, len(s.Tunnels))
	for i, t := range s.Tunnels {
		names[i] = t.Name
	}
	return names
}

func caseNames(s *Summary) []string {
	names := make([]string, len(s.Cases))
	for i, c := range s.Cases {
		names[i] = c.Name
	}
	return names
}

// missing returns the names in a that b lacks.
func missing(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

// listSome lists up to three names, and how many more.
func listSome(names []string) string {
	switch {
	case len(names) == 0:
		return "none"
	case len(names) > 3:
		return fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
	default:
		return strings.Join(names, ", ")
	}
}

// sameSummary: two copies of one run (the same start, machine and histograms) under two names.
func sameSummary(a, b *Summary) bool {
	if !a.Env.StartedAt.Equal(b.Env.StartedAt) || a.Env.GitCommit != b.Env.GitCommit || a.Env.CPUModel != b.Env.CPUModel || len(a.Cases) != len(b.Cases) {
		return false
	}
	for i := range a.Cases {
		if a.Cases[i].LatencyHDR != b.Cases[i].LatencyHDR {
			return false
		}
	}
	return true
}

// caseHistograms decodes every case's latency histogram.
func caseHistograms(r MergeInput) (map[string]*hdrhistogram.Histogram, error) {
	out := make(map[string]*hdrhistogram.Histogram, len(r.Summary.Cases))
	for _, c := range r.Summary.Cases {
		if c.Stalled() {
			continue // no figures, no histogram
		}
		if c.LatencyHDR == "" {
			return nil, fmt.Errorf("%s: case %s has no latency histogram (latency_hdr): the run predates tunnelbench merge; run it again with this version", r.Dir, c.Name)
		}
		h, err := result.DecodeHistogram(c.LatencyHDR)
		if err != nil {
			return nil, fmt.Errorf("%s: case %s: %w", r.Dir, c.Name, err)
		}
		if h.TotalCount() != c.Calls {
			return nil, fmt.Errorf("%s: case %s: the latency histogram holds %d calls, the case %d", r.Dir, c.Name, h.TotalCount(), c.Calls)
		}
		out[c.Name] = h
	}
	return out, nil
}

// mergeTunnels lists the runs' tunnels (the same in every run) with their restarts summed; idle costs
// are each host's own, measured apart, and stay in each run's report.
func mergeTunnels(runs []MergeInput) []TunnelInfo {
	var out []TunnelInfo
	for i, t := range runs[0].Summary.Tunnels {
		t.Idle, t.Restarts = nil, 0
		for _, r := range runs {
			t.Restarts += r.Summary.Tunnels[i].Restarts
		}
		out = append(out, t)
	}
	return out
}

// mergeCase combines one case over every run. A case that stalled in any run is stalled in the merge:
// the figures of the others would describe only part of the load.
func mergeCase(name string, runs []MergeInput, hists []map[string]*hdrhistogram.Histogram) (CaseResult, error) {
	for _, r := range runs {
		if c := r.Summary.caseNamed(name); c.Stalled() {
			out := *c
			out.Stall = new(*c.Stall)
			if out.Stall.DumpPath != "" && !filepath.IsAbs(out.Stall.DumpPath) {
				// Where the run's results went when it was gathered here.
				dir := r.Dir
				if filepath.Ext(dir) == ".json" {
					dir = filepath.Dir(dir)
				}
				out.Stall.DumpPath = filepath.Join(dir, StallDir, filepath.Base(out.Stall.DumpPath))
			}
			return out, nil
		}
	}
	out := *runs[0].Summary.caseNamed(name)
	out.Calls, out.Errors, out.CallsPerSec, out.BytesPerSec, out.OfferedPerSec = 0, 0, 0, 0, 0
	out.ErrorsByCode, out.Routing, out.RatioToDirect = nil, nil, nil
	// Rounds belong to one host's run: their spread says nothing about the merged figures.
	out.Rounds, out.Spread, out.RatioSpread = nil, nil, nil
	lat := load.NewHistogram()
	allocs, cpu := 0.0, 0.0
	for i, r := range runs {
		c := r.Summary.caseNamed(name)
		out.Calls += c.Calls
		out.Errors += c.Errors
		out.CallsPerSec += c.CallsPerSec
		out.BytesPerSec += c.BytesPerSec
		out.OfferedPerSec += c.OfferedPerSec
		allocs += c.AllocsPerCall * float64(c.Calls)
		cpu += c.CPUusPerCall * float64(c.Calls)
		for code, n := range c.ErrorsByCode {
			if out.ErrorsByCode == nil {
				out.ErrorsByCode = map[string]int64{}
			}
			out.ErrorsByCode[code] += n
		}
		if dropped := lat.Merge(hists[i][name]); dropped > 0 {
			return CaseResult{}, fmt.Errorf("%s: case %s: %d latencies outside the histogram's range", r.Dir, name, dropped)
		}
	}
	if out.Calls > 0 {
		out.AllocsPerCall = allocs / float64(out.Calls)
		out.CPUusPerCall = cpu / float64(out.Calls)
	}
	out.Failed = tooManyErrors(out.Calls, out.Errors, runs[0].Summary.maxErrorRate())
	out.Latency = result.LatencyOf(lat)
	enc, err := result.EncodeHistogram(lat)
	if err != nil {
		return CaseResult{}, fmt.Errorf("case %s: %w", name, err)
	}
	out.LatencyHDR = enc
	return out, nil
}

func (s *Summary) caseNamed(name string) *CaseResult {
	for i := range s.Cases {
		if s.Cases[i].Name == name {
			return &s.Cases[i]
		}
	}
	return nil
}

// timedSeconds is a run's timed load: each case's calls over its rate, summed.
func timedSeconds(s *Summary) float64 {
	t := 0.0
	for _, c := range s.Cases {
		if c.CallsPerSec > 0 {
			t += float64(c.Calls) / c.CallsPerSec
		}
	}
	return t
}

// MergeWarnings says what a merged summary's figures cannot vouch for: runs that did not start
// together, so that their throughputs were not at the same time and do not add up.
func MergeWarnings(s *Summary) []string {
	if len(s.MergedFrom) < 2 {
		return nil
	}
	first, last := s.MergedFrom[0], s.MergedFrom[0]
	longest := 0.0
	for _, r := range s.MergedFrom {
		if r.Env.StartedAt.Before(first.Env.StartedAt) {
			first = r
		}
		if r.Env.StartedAt.After(last.Env.StartedAt) {
			last = r
		}
		longest = max(longest, r.TimedS)
	}
	skew := last.Env.StartedAt.Sub(first.Env.StartedAt)
	if skew <= MergeStartSkew+time.Duration(longest/10*float64(time.Second)) {
		return nil
	}
	return []string{fmt.Sprintf("the runs did not start together: %s started %s after %s (runs of about %.0f s of load): calls/s and bytes/s add up only for load at the same time",
		last.Dir, skew.Round(time.Second), first.Dir, longest)}
}

// errNoRuns is what ReadMergeInputs says without directories.
var errNoRuns = errors.New("merge needs at least two runs' directories (or summary.json files)")

// ReadMergeInputs reads each path's summary.json for Merge.
func ReadMergeInputs(paths []string) ([]MergeInput, error) {
	if len(paths) == 0 {
		return nil, errNoRuns
	}
	runs := make([]MergeInput, 0, len(paths))
	for _, p := range paths {
		s, err := ReadSummary(p)
		if err != nil {
			return nil, err
		}
		runs = append(runs, MergeInput{Dir: p, Summary: s})
	}
	return runs, nil
}
