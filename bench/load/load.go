// Package load holds the load generators of the harness, which bench and the chaos runner share: each
// drives a Call function (or a TickCall, told each call's number and due time) and records every call's
// latency in a real histogram, its outcome by gRPC code, and the bytes it moved; an Observer sees the
// calls live.
//
// Generators never share state between runs and never hide queueing: an open loop measures from the
// scheduled send time.
package load

import (
	"context"
	"runtime"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Call makes one call and returns the payload bytes it moved (sent plus received).
type Call func(ctx context.Context) (bytes int, err error)

// NewCall returns the Call one worker uses; a worker may keep state in it (an open stream, say). The
// context a generator passes to calls ends with the run.
type NewCall func() Call

// Generator drives calls and reports what happened.
type Generator interface {
	Run(ctx context.Context, newCall NewCall) (*Result, error)
}

// Histogram bounds: 1 µs to 5 min at 3 significant digits, so any recorded value is within 0.1%.
const (
	histMin    = 1
	histMax    = int64(5 * time.Minute / time.Microsecond)
	histDigits = 3
)

// NewHistogram returns an empty latency histogram in microseconds.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMin, histMax, histDigits)
}

// Result is what one run measured.
type Result struct {
	// Calls counts every finished call, failed ones included; Errors the failed ones.
	Calls  int64
	Errors int64
	ByCode map[codes.Code]int64
	// Bytes counts the payload of successful calls only: a failed call moved nothing the caller can use
	// (a refused 1 MiB echo must not read as 1 MiB/s of throughput).
	Bytes   int64
	Elapsed time.Duration
	// Latency in microseconds, of successful and failed calls alike.
	Latency *hdrhistogram.Histogram
	// AllocsPerCall counts every heap allocation in the process during the timed run (caller, kas and
	// agent alike) divided by the calls.
	AllocsPerCall float64
	// Offered is the rate the generator tried to send at (open loop); zero for a closed loop.
	Offered float64
	// Missed counts calls an open loop's schedule asked for that had not started when the run ended,
	// because every worker was busy: the target could not keep up with Offered. Zero for a closed loop.
	Missed int64
	// ByHTTPStatus counts HTTP responses by status code (0: no response, such as a refused connection
	// or a timeout); nil for gRPC generators. ByCode holds the same outcomes mapped to gRPC codes.
	ByHTTPStatus map[int]int64
}

// OK counts the calls that succeeded.
func (r *Result) OK() int64 { return r.Calls - r.Errors }

// CallsPerSecond is the achieved rate of successful calls: failed calls are never throughput.
func (r *Result) CallsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK()) / r.Elapsed.Seconds()
}

// BytesPerSecond is the payload throughput of successful calls.
func (r *Result) BytesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds()
}

// Quantile returns the latency at q (0..100) in microseconds.
func (r *Result) Quantile(q float64) int64 {
	return r.Latency.ValueAtQuantile(q)
}

// Observer sees calls as they happen, for live metrics (the harness's /metrics). It must be cheap and
// safe for concurrent use: workers call it on their hot path.
type Observer interface {
	// Offered counts calls the generator means to send.
	Offered(n int)
	// Call is one finished, recorded call.
	Call(d time.Duration, code codes.Code)
}

// recorder is one worker's share of a result; workers merge theirs at the end, so the hot path takes no
// lock.
type recorder struct {
	calls, errors, bytes int64
	byCode               map[codes.Code]int64
	hist                 *hdrhistogram.Histogram
	obs                  Observer
}

func newRecorder() *recorder {
	return &recorder{byCode: map[codes.Code]int64{}, hist: NewHistogram()}
}

func (r *recorder) record(d time.Duration, n int, err error) {
	r.calls++
	code := status.Code(err)
	r.byCode[code]++
	if err != nil {
		r.errors++
	} else {
		r.bytes += int64(n)
	}
	if r.obs != nil {
		r.obs.Call(d, code)
	}
	us := d.Microseconds()
	if us < histMin {
		us = histMin
	}
	if us > histMax {
		us = histMax
	}
	_ = r.hist.RecordValue(us)
}

func merge(rs []*recorder, elapsed time.Duration, mallocs uint64) *Result {
	res := &Result{ByCode: map[codes.Code]int64{}, Latency: NewHistogram(), Elapsed: elapsed}
	for _, r := range rs {
		res.Calls += r.calls
		res.Errors += r.errors
		res.Bytes += r.bytes
		for c, n := range r.byCode {
			res.ByCode[c] += n
		}
		res.Latency.Merge(r.hist)
	}
	if res.Calls > 0 {
		res.AllocsPerCall = float64(mallocs) / float64(res.Calls)
	}
	return res
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// Add folds another run of the same case into r: counts and histograms add up, rates are recomputed
// over the summed elapsed time.
func (r *Result) Add(o *Result) {
	allocs := r.AllocsPerCall*float64(r.Calls) + o.AllocsPerCall*float64(o.Calls)
	r.Calls += o.Calls
	r.Errors += o.Errors
	r.Bytes += o.Bytes
	r.Elapsed += o.Elapsed
	r.Missed += o.Missed
	for s, n := range o.ByHTTPStatus {
		if r.ByHTTPStatus == nil {
			r.ByHTTPStatus = map[int]int64{}
		}
		r.ByHTTPStatus[s] += n
	}
	for c, n := range o.ByCode {
		if r.ByCode == nil {
			r.ByCode = map[codes.Code]int64{}
		}
		r.ByCode[c] += n
	}
	r.Latency.Merge(o.Latency)
	if r.Calls > 0 {
		r.AllocsPerCall = allocs / float64(r.Calls)
	}
}
