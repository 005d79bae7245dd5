package load

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"google.golang.org/grpc/codes"
)

// DefaultHTTPTimeout bounds one HTTP request when HTTP.Timeout is zero.
const DefaultHTTPTimeout = 30 * time.Second

// Attack names: vegeta sends them in the X-Vegeta-Attack header, so a target can tell warm-up requests
// from timed ones.
const (
	AttackName       = "tunnelbench"
	WarmupAttackName = "tunnelbench-warmup"
)

// HTTP sends requests to one HTTP target at a fixed Rate for Duration with vegeta's Attacker, for the
// HTTP-over-tunnel cases and for HTTP baselines. It is not a Generator: vegeta makes the requests.
//
// Latency is vegeta's: from the moment a worker sends a request until its body has been read. Vegeta
// adds a worker whenever all are busy (without bound unless MaxWorkers is set), so requests rarely wait
// in the generator. With MaxWorkers set, a slow target makes requests wait for a worker, that wait is
// not in the latency and the achieved rate falls below Rate: compare CallsPerSecond with Offered.
// Every response counts: by HTTP status in Result.ByHTTPStatus and by the matching gRPC code (the
// mapping gRPC uses for HTTP statuses, see httpCode) in Result.ByCode; a status outside 2xx and 3xx
// and a request that got no response are errors, and their bytes do not count.
type HTTP struct {
	// Target is the request to send; Method defaults to GET.
	Target vegeta.Target
	// Rate in requests per second.
	Rate     float64
	Duration time.Duration
	Warmup   time.Duration
	// Timeout bounds one request; zero means DefaultHTTPTimeout.
	Timeout time.Duration
	// MaxWorkers bounds the requests in flight; zero means no bound (vegeta's default).
	MaxWorkers uint64
	// Transport, when set, makes the requests (a tunnel's, say); by default each run uses its own
	// http.Transport and closes its connections at the end.
	Transport http.RoundTripper
}

// Run attacks the target: a warm-up that records nothing, then the timed run.
func (h HTTP) Run(ctx context.Context) (*Result, error) {
	var errs []error
	if !(h.Rate > 0 && h.Rate <= 1e9) {
		errs = append(errs, fmt.Errorf("http load rate %v: want between 0 and 1e9 requests/s", h.Rate))
	}
	if h.Duration <= 0 || h.Warmup < 0 || h.Timeout < 0 {
		errs = append(errs, errors.New("http load needs a positive duration and a warm-up and timeout >= 0"))
	}
	if h.Target.URL == "" {
		errs = append(errs, errors.New("http load needs a target URL"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if h.Target.Method == "" {
		h.Target.Method = http.MethodGet
	}
	if _, err := h.Target.Request(); err != nil {
		return nil, fmt.Errorf("http load target: %w", err)
	}
	rt := h.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		t.MaxIdleConnsPerHost = vegeta.DefaultConnections
		defer t.CloseIdleConnections()
		rt = t
	}
	client := &http.Client{Transport: rt, Timeout: h.Timeout}
	if client.Timeout == 0 {
		client.Timeout = DefaultHTTPTimeout
	}
	if h.Warmup > 0 {
		h.attack(ctx, client, h.Warmup, WarmupAttackName, nil)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := newRecorder()
	statuses := map[int]int64{}
	before := mallocs()
	elapsed := h.attack(ctx, client, h.Duration, AttackName, func(v *vegeta.Result) {
		code := httpCode(int(v.Code), v.Error)
		statuses[int(v.Code)]++
		r.recordCode(v.Latency, int(v.BytesIn+v.BytesOut), code, v.Error != "" || code != codes.OK)
	})
	res := merge([]*recorder{r}, elapsed, mallocs()-before)
	res.Offered = h.Rate
	res.ByHTTPStatus = statuses
	return res, nil
}

// attack runs one vegeta attack named name for d and hands each result to record (nil: discard). It returns when
// every request has ended, having taken the time it returns.
func (h HTTP) attack(ctx context.Context, client *http.Client, d time.Duration, name string, record func(*vegeta.Result)) time.Duration {
	opts := []func(*vegeta.Attacker){vegeta.Client(client)}
	if h.MaxWorkers > 0 {
		opts = append(opts, vegeta.MaxWorkers(h.MaxWorkers), vegeta.Workers(min(h.MaxWorkers, vegeta.DefaultWorkers)))
	}
	a := vegeta.NewAttacker(opts...)
	pacer := OpenLoop{Rate: h.Rate}.Pacer()
	stop := context.AfterFunc(ctx, func() { a.Stop() })
	defer stop()
	start := time.Now()
	// Read every result, even after a stop: vegeta's workers block until theirs is taken.
	for v := range a.Attack(vegeta.NewStaticTargeter(h.Target), pacer, d, name) {
		if record != nil && ctx.Err() == nil {
			record(v)
		}
	}
	return time.Since(start)
}

// recordCode is record for outcomes that are not Go errors.
func (r *recorder) recordCode(d time.Duration, n int, code codes.Code, failed bool) {
	r.calls++
	r.byCode[code]++
	if failed {
		r.errors++
	} else {
		r.bytes += int64(n)
	}
	us := min(max(d.Microseconds(), histMin), histMax)
	_ = r.hist.RecordValue(us)
}

// httpCode maps an HTTP outcome to a gRPC code: 2xx and 3xx are OK; other statuses follow gRPC's table
// for HTTP responses that carry no gRPC status (400 Internal, 401 Unauthenticated, 403
// PermissionDenied, 404 Unimplemented, 429/502/503/504 Unavailable, anything else Unknown); no response
// is DeadlineExceeded after a timeout and Unavailable otherwise.
func httpCode(status int, errText string) codes.Code {
	switch {
	case status == 0:
		if strings.Contains(errText, "Timeout") || strings.Contains(errText, "deadline exceeded") {
			return codes.DeadlineExceeded
		}
		return codes.Unavailable
	case status >= 200 && status < 400:
		return codes.OK
	}
	switch status {
	case http.StatusBadRequest:
		return codes.Internal
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}
