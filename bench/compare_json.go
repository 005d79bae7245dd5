package bench

import (
	"encoding/json"
	"io"
)

// CompareSchema names the format of compare.json.
const CompareSchema = "tunnelbench/compare/v1"

// CompareFile is the file bench writes a comparison to, next to summary.json.
const CompareFile = "compare.json"

// compareDoc is compare.json: the verdict first, then what it rests on. Metric keys are p50, p99,
// calls_per_s and bytes_per_s, as in summary.json.
type compareDoc struct {
	Schema string `json:"schema"`
	// Verdict is VerdictRegressed, VerdictNoRegression or VerdictRefused; Summary says it in a sentence.
	Verdict     string             `json:"verdict"`
	Summary     string             `json:"summary"`
	Regressions int                `json:"regressions"`
	Refused     []string           `json:"refused"`
	Warnings    []string           `json:"warnings"`
	Old         compareRun         `json:"old"`
	New         compareRun         `json:"new"`
	NoiseCases  int                `json:"noise_cases"`
	Noise       map[string]float64 `json:"noise"`
	Threshold   map[string]float64 `json:"threshold"`
	Cases       []compareCase      `json:"cases"`
	OnlyOld     []string           `json:"only_old"`
	OnlyNew     []string           `json:"only_new"`
}

type compareRun struct {
	Name      string `json:"name,omitempty"`
	Commit    string `json:"commit"`
	StartedAt string `json:"started_at"`
}

type compareCase struct {
	Name      string             `json:"name"`
	Direct    bool               `json:"direct"`
	Verdict   string             `json:"verdict"`
	Regressed []string           `json:"regressed"`
	Improved  []string           `json:"improved"`
	Worsening map[string]float64 `json:"worsening"`
	Spread    map[string]float64 `json:"spread,omitempty"`
	Old       compareFigures     `json:"old"`
	New       compareFigures     `json:"new"`
}

type compareFigures struct {
	P50us         int64   `json:"p50_us"`
	P99us         int64   `json:"p99_us"`
	CallsPerSec   float64 `json:"calls_per_s"`
	BytesPerSec   float64 `json:"bytes_per_s"`
	Errors        int64   `json:"errors"`
	Failed        bool    `json:"failed"`
	Stalled       bool    `json:"stalled,omitempty"`
	RatioToDirect *Ratio  `json:"ratio_to_direct"`
}

// jsonKey is the metric's key in compare.json, summary.json's name for the same figure.
func (m Metric) jsonKey() string {
	switch m {
	case MetricCallsPerSec:
		return "calls_per_s"
	case MetricBytesPerSec:
		return "bytes_per_s"
	}
	return string(m)
}

func metricMap(in map[Metric]float64) map[string]float64 {
	if in == nil {
		return nil
	}
	out := map[string]float64{}
	for m, v := range in {
		out[m.jsonKey()] = v
	}
	return out
}

func metricKeys(ms []Metric) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.jsonKey())
	}
	return out
}

func figuresOf(c CaseResult, failed bool) compareFigures {
	return compareFigures{P50us: c.Latency.P50, P99us: c.Latency.P99, CallsPerSec: c.CallsPerSec, BytesPerSec: c.BytesPerSec,
		Errors: c.Errors, Failed: failed, Stalled: c.Stalled(), RatioToDirect: c.RatioToDirect}
}

func runOf(name string, e Env) compareRun {
	return compareRun{Name: name, Commit: e.GitCommit, StartedAt: e.StartedAt.UTC().Format("2006-01-02T15:04:05Z")}
}

// WriteComparisonJSON writes compare.json.
func WriteComparisonJSON(w io.Writer, c Comparison) error {
	doc := compareDoc{
		Schema: CompareSchema, Verdict: c.Verdict(), Summary: c.VerdictText(), Regressions: len(c.Regressions()),
		Refused: nonNil(c.Refused), Warnings: nonNil(c.Warnings),
		Old: runOf(c.OldName, c.Old), New: runOf(c.NewName, c.New),
		NoiseCases: c.NoiseCases, Noise: metricMap(c.Noise), Threshold: metricMap(c.Threshold),
		Cases: []compareCase{}, OnlyOld: nonNil(c.OnlyOld), OnlyNew: nonNil(c.OnlyNew),
	}
	for _, cc := range c.Cases {
		doc.Cases = append(doc.Cases, compareCase{
			Name: cc.Name, Direct: cc.Direct, Verdict: c.verdict(cc),
			Regressed: metricKeys(cc.Regressed), Improved: metricKeys(cc.Improved),
			Worsening: metricMap(cc.Worsening), Spread: metricMap(cc.Spread),
			Old: figuresOf(cc.Old, cc.OldFailed), New: figuresOf(cc.New, cc.NewFailed),
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
