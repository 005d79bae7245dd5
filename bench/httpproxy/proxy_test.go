package httpproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A request through the chain reaches the upstream's path and query, through Hops proxies, and the
// upstream's status, header and body come back.
func TestChainForwards(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("X-Path", r.URL.Path+"?"+r.URL.RawQuery)
		w.Header().Set("X-Hops", r.Header.Get("X-Forwarded-For"))
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "body of "+r.URL.Path)
	}))
	defer up.Close()
	c, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(c.URL + "/a/b?x=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || string(body) != "body of /a/b" || resp.Header.Get("X-Path") != "/a/b?x=1" {
		t.Fatalf("got %d %q, X-Path %q; want 418 %q, %q", resp.StatusCode, body, resp.Header.Get("X-Path"), "body of /a/b", "/a/b?x=1")
	}
	// Each proxy appends the address it was called from: Hops of them reached the upstream.
	if n := len(strings.Split(resp.Header.Get("X-Hops"), ",")); n != Hops {
		t.Fatalf("X-Forwarded-For %q: %d hops, want %d", resp.Header.Get("X-Hops"), n, Hops)
	}
	if hits.Load() != 1 {
		t.Fatalf("upstream hit %d times, want 1", hits.Load())
	}
}

func TestStartRefusesBadUpstream(t *testing.T) {
	for _, u := range []string{"", "https://127.0.0.1:1", "http://", "::bad"} {
		if c, err := Start(u); err == nil {
			_ = c.Close()
			t.Errorf("Start(%q): no error", u)
		}
	}
}
