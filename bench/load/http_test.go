package load

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"google.golang.org/grpc/codes"
)

// TestHTTPLoad: every request is counted by status, warm-up requests are not, bytes add up both ways.
func TestHTTPLoad(t *testing.T) {
	var (
		mu      sync.Mutex
		n       int
		byPhase = map[string]map[int]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		status := http.StatusOK
		if n%4 == 0 {
			status = http.StatusServiceUnavailable
		}
		phase := r.Header.Get("X-Vegeta-Attack")
		if byPhase[phase] == nil {
			byPhase[phase] = map[int]int{}
		}
		byPhase[phase][status]++
		mu.Unlock()
		w.WriteHeader(status)
		if status == http.StatusOK {
			w.Write(make([]byte, 100))
		} else {
			w.Write([]byte("busy"))
		}
	}))
	defer srv.Close()

	gen := HTTP{
		Target:   vegeta.Target{Method: http.MethodPost, URL: srv.URL + "/echo", Body: []byte("0123456789")},
		Rate:     200,
		Duration: 500 * time.Millisecond,
		Warmup:   100 * time.Millisecond,
	}
	res, err := gen.Run(testContext(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ok, busy := int64(byPhase[AttackName][200]), int64(byPhase[AttackName][503])
	warm := byPhase[WarmupAttackName][200] + byPhase[WarmupAttackName][503]
	mu.Unlock()
	if warm == 0 {
		t.Errorf("no warm-up request reached the server")
	}
	if res.Calls != ok+busy {
		t.Fatalf("%d calls recorded, the server answered %d timed requests", res.Calls, ok+busy)
	}
	if want := gen.Rate * gen.Duration.Seconds(); float64(res.Calls) < want*0.95 || float64(res.Calls) > want*1.05 {
		t.Errorf("%d calls, want %.0f ± 5%%", res.Calls, want)
	}
	if res.ByHTTPStatus[200] != ok || res.ByHTTPStatus[503] != busy || len(res.ByHTTPStatus) != 2 {
		t.Errorf("by HTTP status %v, server saw 200: %d, 503: %d", res.ByHTTPStatus, ok, busy)
	}
	if res.ByCode[codes.OK] != ok || res.ByCode[codes.Unavailable] != busy || res.Errors != busy {
		t.Errorf("by code %v, errors %d; want OK %d, Unavailable %d", res.ByCode, res.Errors, ok, busy)
	}
	if want := ok * (100 + 10); res.Bytes != want {
		t.Errorf("%d bytes, want %d (bodies in and out of the successful requests only)", res.Bytes, want)
	}
	if res.Latency.TotalCount() != res.Calls || res.Offered != 200 {
		t.Errorf("histogram holds %d of %d calls, offered %v", res.Latency.TotalCount(), res.Calls, res.Offered)
	}
}

// TestHTTPLoadNoResponse: requests that get no response are errors, not lost.
func TestHTTPLoadNoResponse(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more

	res, err := HTTP{Target: vegeta.Target{URL: url}, Rate: 50, Duration: 200 * time.Millisecond}.Run(testContext(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls == 0 || res.Errors != res.Calls || res.ByHTTPStatus[0] != res.Calls || res.ByCode[codes.Unavailable] != res.Calls {
		t.Errorf("calls %d errors %d by status %v by code %v: want every call an Unavailable error", res.Calls, res.Errors, res.ByHTTPStatus, res.ByCode)
	}
}

// TestHTTPLoadTimeout: a request that outlives Timeout counts as DeadlineExceeded.
func TestHTTPLoadTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	res, err := HTTP{Target: vegeta.Target{URL: srv.URL}, Rate: 20, Duration: 200 * time.Millisecond, Timeout: 50 * time.Millisecond}.Run(testContext(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls == 0 || res.ByCode[codes.DeadlineExceeded] != res.Calls || res.Errors != res.Calls {
		t.Errorf("calls %d errors %d by code %v: want every call DeadlineExceeded", res.Calls, res.Errors, res.ByCode)
	}
}

func TestHTTPLoadValidate(t *testing.T) {
	for _, gen := range []HTTP{
		{Target: vegeta.Target{URL: "http://127.0.0.1:1"}, Duration: time.Second},
		{Target: vegeta.Target{URL: "http://127.0.0.1:1"}, Rate: 1},
		{Rate: 1, Duration: time.Second},
		{Target: vegeta.Target{URL: "::not a url"}, Rate: 1, Duration: time.Second},
	} {
		if _, err := gen.Run(t.Context()); err == nil {
			t.Errorf("%+v: no error", gen)
		}
	}
}

func TestHTTPCode(t *testing.T) {
	for _, c := range []struct {
		status int
		err    string
		want   codes.Code
	}{
		{200, "", codes.OK},
		{204, "", codes.OK},
		{302, "", codes.OK},
		{400, "400 Bad Request", codes.Internal},
		{401, "", codes.Unauthenticated},
		{403, "", codes.PermissionDenied},
		{404, "", codes.Unimplemented},
		{429, "", codes.Unavailable},
		{500, "", codes.Unknown},
		{502, "", codes.Unavailable},
		{503, "", codes.Unavailable},
		{504, "", codes.Unavailable},
		{0, "dial tcp: connection refused", codes.Unavailable},
		{0, "Post \"x\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)", codes.DeadlineExceeded},
	} {
		if got := httpCode(c.status, c.err); got != c.want {
			t.Errorf("httpCode(%d, %q) = %v, want %v", c.status, strings.TrimSpace(c.err), got, c.want)
		}
	}
}
