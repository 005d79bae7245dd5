package limits

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
)

func TestHTTPGuard(t *testing.T) {
	callers, err := auth.NewStaticCallerTokens(map[string][]int64{"good": {1}})
	if err != nil {
		t.Fatal(err)
	}
	var hits []string
	var reached *http.Request
	g := &HTTPGuard{
		Next:      http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { reached = r }),
		Callers:   callers,
		MaxBody:   1 << 20,
		MaxHeader: 1 << 10,
		OnLimit:   func(l string) { hits = append(hits, l) },
	}
	for _, tc := range []struct {
		name, path, token, header string
		body                      int64
		code                      int
		inBody                    string
		hit                       string
	}{
		{name: "header too large, before the token", path: "/agents/1/x", header: strings.Repeat("a", 2<<10), code: http.StatusRequestHeaderFieldsTooLarge, inBody: "(--max-http-header-bytes) is 1024 bytes", hit: HTTPHeader},
		{name: "no token", path: "/agents/1/x", code: http.StatusUnauthorized, inBody: "missing caller token"},
		{name: "unknown token", path: "/agents/1/x", token: "bad", code: http.StatusUnauthorized, inBody: "invalid caller token"},
		{name: "agent not allowed", path: "/agents/2/x", token: "good", code: http.StatusForbidden},
		{name: "body too large, after the token", path: "/agents/1/x", token: "good", body: 2 << 20, code: http.StatusRequestEntityTooLarge, inBody: "(--max-http-body) is 1 MiB", hit: HTTPBody},
		{name: "allowed", path: "/agents/1/x", token: "good", body: 10, code: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits, reached = nil, nil
			r := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(""))
			r.ContentLength = tc.body
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.header != "" {
				r.Header.Set("X-Big", tc.header)
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.inBody) {
				t.Fatalf("%d %q, want %d with %q", w.Code, w.Body.String(), tc.code, tc.inBody)
			}
			if (tc.hit == "" && len(hits) != 0) || (tc.hit != "" && (len(hits) != 1 || hits[0] != tc.hit)) {
				t.Errorf("limits hit %v, want %q", hits, tc.hit)
			}
			if (reached != nil) != (tc.code == http.StatusOK) {
				t.Fatalf("the request reached the next handler: %v, want %v", reached != nil, tc.code == http.StatusOK)
			}
			if reached != nil && reached.Header.Get("Authorization") != "" {
				t.Errorf("kas's caller token went on to the agent")
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{1 << 30: "1 GiB", 3 << 20: "3 MiB", 1<<20 + 1: "1048577 bytes", 0: "0 bytes"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
