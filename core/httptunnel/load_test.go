package httptunnel_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// TestLoadSmoke: 200 requests/s for 2 s through kas's HTTP listener; every request succeeds.
func TestLoadSmoke(t *testing.T) {
	testtier.Full(t, "runs 2 s of load")
	f := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), fixtureConfig{})
	tr := &http.Transport{MaxIdleConnsPerHost: 100, DisableCompression: true}
	defer tr.CloseIdleConnections()
	attacker := vegeta.NewAttacker(vegeta.Client(&http.Client{Transport: tr, Timeout: 10 * time.Second}))
	targeter := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: f.url("/")})
	var metrics vegeta.Metrics
	for res := range attacker.Attack(targeter, vegeta.Rate{Freq: 200, Per: time.Second}, 2*time.Second, "smoke") {
		metrics.Add(res)
		if res.Code != http.StatusOK || res.Error != "" || string(res.Body) != "ok" {
			t.Errorf("request %d: status %d, error %q, body %q", res.Seq, res.Code, res.Error, res.Body)
		}
	}
	metrics.Close()
	t.Logf("%d requests, success %.3f, latency p50 %s p99 %s max %s", metrics.Requests, metrics.Success,
		metrics.Latencies.P50, metrics.Latencies.P99, metrics.Latencies.Max)
	if metrics.Requests < 390 || metrics.Success != 1 {
		t.Fatalf("%d requests, success ratio %.3f, errors %q; want about 400, all successful", metrics.Requests, metrics.Success, metrics.Errors)
	}
}
