package httptunnel_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// seenRequest is what reached the upstream.
type seenRequest struct {
	method, escapedPath, rawQuery, host string
	header                              http.Header
	contentLength                       int64
	transferEncoding                    []string
	body                                []byte
}

// recorder is an upstream that records each request and answers with headers that test both
// directions of header handling.
type recorder struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	rec.mu.Lock()
	rec.seen = append(rec.seen, seenRequest{
		method: r.Method, escapedPath: r.URL.EscapedPath(), rawQuery: r.URL.RawQuery, host: r.Host,
		header: r.Header.Clone(), contentLength: r.ContentLength, transferEncoding: r.TransferEncoding, body: body,
	})
	rec.mu.Unlock()
	h := w.Header()
	h.Add("X-Multi", "a")
	h.Add("X-Multi", "b")
	h.Set("Set-Cookie", "k=v; Path=/")
	h.Set("Connection", "X-Upstream-Hop")
	h.Set("X-Upstream-Hop", "must not pass")
	h.Set("Proxy-Authenticate", "Basic")
	out := fmt.Sprintf("%s %s body=%q", r.Method, r.URL.EscapedPath(), body)
	h.Set("Content-Length", strconv.Itoa(len(out)))
	code := map[string]int{http.MethodPost: http.StatusCreated, http.MethodDelete: http.StatusAccepted}[r.Method]
	if code == 0 {
		code = http.StatusOK
	}
	w.WriteHeader(code)
	_, _ = io.WriteString(w, out)
}

func (rec *recorder) last(t *testing.T) seenRequest {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) == 0 {
		t.Fatal("no request reached the upstream")
	}
	return rec.seen[len(rec.seen)-1]
}

func TestMethodsHeadersAndStatus(t *testing.T) {
	rec := &recorder{}
	f := start(t, rec, fixtureConfig{})
	for proto, client := range f.clients() {
		for _, tc := range []struct {
			method string
			body   string
			code   int
		}{
			{http.MethodGet, "", http.StatusOK},
			{http.MethodPost, "posted", http.StatusCreated},
			{http.MethodPut, "put this", http.StatusOK},
			{http.MethodDelete, "", http.StatusAccepted},
			{http.MethodHead, "", http.StatusOK},
		} {
			t.Run(proto+"/"+tc.method, func(t *testing.T) {
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				req, err := http.NewRequestWithContext(ctx(t), tc.method, f.url("/some/p%61th/?q=1&r=a%20b"), body)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Add("X-Client", "c1")
				req.Header.Add("X-Client", "c2")
				req.Header.Set("Authorization", "Bearer end-to-end")
				req.Header.Set("Proxy-Authorization", "Basic for-kas-only")
				if proto == "HTTP/1.1" { // HTTP/2 has no connection-specific fields
					req.Header.Set("Connection", "X-Client-Hop")
					req.Header.Set("X-Client-Hop", "must not pass")
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				got, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != tc.code {
					t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, tc.code, got)
				}
				want := fmt.Sprintf("%s /some/p%%61th/ body=%q", tc.method, tc.body)
				if tc.method == http.MethodHead {
					if len(got) != 0 || resp.ContentLength != int64(len(fmt.Sprintf("HEAD /some/p%%61th/ body=%q", ""))) {
						t.Fatalf("HEAD: body %q, content length %d", got, resp.ContentLength)
					}
				} else if string(got) != want {
					t.Fatalf("body %q, want %q", got, want)
				}
				if v := resp.Header.Values("X-Multi"); !slices.Equal(v, []string{"a", "b"}) {
					t.Errorf("X-Multi %q, want [a b]", v)
				}
				if v := resp.Header.Get("Set-Cookie"); v != "k=v; Path=/" {
					t.Errorf("Set-Cookie %q", v)
				}
				for _, k := range []string{"X-Upstream-Hop", "Proxy-Authenticate"} {
					if v, ok := resp.Header[k]; ok {
						t.Errorf("hop-by-hop response field %s passed: %q", k, v)
					}
				}
				if v := resp.Header.Get("Via"); v != "1.1 kas" {
					t.Errorf("response Via %q, want %q", v, "1.1 kas")
				}

				seen := rec.last(t)
				if seen.method != tc.method || seen.escapedPath != "/some/p%61th/" || seen.rawQuery != "q=1&r=a%20b" {
					t.Errorf("upstream saw %s %s ? %s", seen.method, seen.escapedPath, seen.rawQuery)
				}
				if string(seen.body) != tc.body {
					t.Errorf("upstream got body %q, want %q", seen.body, tc.body)
				}
				if v := seen.header.Values("X-Client"); !slices.Equal(v, []string{"c1", "c2"}) {
					t.Errorf("X-Client %q", v)
				}
				if v := seen.header.Get("Authorization"); v != "Bearer end-to-end" {
					t.Errorf("Authorization %q, want it passed", v)
				}
				for _, k := range []string{"X-Client-Hop", "Proxy-Authorization", "Connection", "Te"} {
					if v, ok := seen.header[k]; ok {
						t.Errorf("hop-by-hop request field %s passed: %q", k, v)
					}
				}
				wantVia := "1.1 kas"
				if proto == "h2c" {
					wantVia = "2 kas"
				}
				if v := seen.header.Get("Via"); v != wantVia {
					t.Errorf("request Via %q, want %q", v, wantVia)
				}
				if v := seen.header.Get("X-Forwarded-Host"); v != strings.TrimPrefix(f.kasURL, "http://") {
					t.Errorf("X-Forwarded-Host %q", v)
				}
				if v := seen.header.Get("User-Agent"); v != "Go-http-client/"+map[string]string{"HTTP/1.1": "1.1", "h2c": "2.0"}[proto] {
					t.Errorf("User-Agent %q, want the client's", v)
				}
				if seen.host != strings.TrimPrefix(f.upstream.URL, "http://") {
					t.Errorf("upstream Host %q, want the upstream's own", seen.host)
				}
			})
		}
	}
}

// chunkedReader hides its length, so that the client sends a body of unknown length.
type chunkedReader struct{ r io.Reader }

func (c chunkedReader) Read(p []byte) (int, error) { return c.r.Read(p) }

func TestBodiesFixedAndChunked(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 000 bytes: several chunks
	f := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("X-Request-Length", strconv.FormatInt(r.ContentLength, 10))
		w.Header().Set("X-Request-Chunked", strconv.FormatBool(slices.Contains(r.TransferEncoding, "chunked")))
		w.Header().Set("X-Request-Body-OK", strconv.FormatBool(bytes.Equal(body, payload) || len(body) == 0))
		w.Header().Set("Trailer", "X-Sum")
		if r.URL.Query().Get("fixed") == "1" {
			w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		}
		for part := range slices.Chunk(payload, 50000) {
			_, _ = w.Write(part)
			http.NewResponseController(w).Flush()
		}
		w.Header().Set("X-Sum", strconv.Itoa(len(payload)))
	}), fixtureConfig{})
	for proto, client := range f.clients() {
		for _, upload := range []string{"empty", "fixed", "chunked"} {
			for _, download := range []string{"fixed", "chunked"} {
				t.Run(fmt.Sprintf("%s/upload-%s/download-%s", proto, upload, download), func(t *testing.T) {
					var body io.Reader
					switch upload {
					case "fixed":
						body = bytes.NewReader(payload)
					case "chunked":
						body = chunkedReader{bytes.NewReader(payload)}
					}
					u := f.url("/echo")
					if download == "fixed" {
						u += "?fixed=1"
					}
					req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, u, body)
					if err != nil {
						t.Fatal(err)
					}
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer func() { _ = resp.Body.Close() }()
					got, err := io.ReadAll(resp.Body)
					if err != nil {
						t.Fatal(err)
					}
					if resp.StatusCode != http.StatusOK || !bytes.Equal(got, payload) {
						t.Fatalf("status %d, %d bytes back (want %d)", resp.StatusCode, len(got), len(payload))
					}
					wantLength := map[string]string{"empty": "0", "fixed": strconv.Itoa(len(payload)), "chunked": "-1"}[upload]
					if v := resp.Header.Get("X-Request-Length"); v != wantLength {
						t.Errorf("upstream saw content length %s, want %s", v, wantLength)
					}
					if v := resp.Header.Get("X-Request-Chunked"); v != strconv.FormatBool(upload == "chunked") {
						t.Errorf("upstream saw chunked=%s", v)
					}
					if v := resp.Header.Get("X-Request-Body-OK"); v != "true" {
						t.Errorf("upstream got a different body")
					}
					if download == "fixed" {
						if resp.ContentLength != int64(len(payload)) {
							t.Errorf("response content length %d, want %d", resp.ContentLength, len(payload))
						}
					} else {
						if resp.ContentLength != -1 {
							t.Errorf("response content length %d, want unknown", resp.ContentLength)
						}
						// Trailers need a body of unknown length in HTTP/1.1.
						if v := resp.Trailer.Get("X-Sum"); v != strconv.Itoa(len(payload)) {
							t.Errorf("trailer X-Sum %q", v)
						}
					}
				})
			}
		}
	}
}
