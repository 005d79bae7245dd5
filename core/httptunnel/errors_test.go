package httptunnel_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// get fetches url and returns the status, the body and the error reading it.
func get(t *testing.T, client *http.Client, url string, header ...string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// wantOneLine checks an error response: the status, a single plain-text line that contains every
// fragment.
func wantOneLine(t *testing.T, resp *http.Response, body string, code int, fragments ...string) {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, code, body)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
		t.Errorf("want one line of text, got %q (%s)", body, resp.Header.Get("Content-Type"))
	}
	for _, f := range fragments {
		if !strings.Contains(body, f) {
			t.Errorf("body %q does not say %q", body, f)
		}
	}
}

func TestUpstreamFailures(t *testing.T) {
	f := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/abort-before-header":
			panic(http.ErrAbortHandler)
		case "/abort-fixed":
			w.Header().Set("Content-Length", "100000")
			_, _ = w.Write(make([]byte, 40000))
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		case "/abort-chunked":
			_, _ = w.Write(make([]byte, 40000))
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		case "/short":
			// Fewer bytes than announced: the upstream server closes the connection.
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "short")
		}
	}), fixtureConfig{})
	for proto, client := range f.clients() {
		t.Run(proto+"/before-header", func(t *testing.T) {
			resp, body, err := get(t, client, f.url("/abort-before-header"))
			if err != nil {
				t.Fatal(err)
			}
			wantOneLine(t, resp, body, http.StatusBadGateway, "bad gateway: agent 1: upstream "+f.upstream.URL+": GET /abort-before-header: EOF")
		})
		for _, path := range []string{"/abort-fixed", "/abort-chunked", "/short"} {
			t.Run(proto+path, func(t *testing.T) {
				resp, body, err := get(t, client, f.url(path))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d, want the upstream's 200", resp.StatusCode)
				}
				if err == nil {
					t.Fatalf("the client read a truncated body (%d bytes) as complete", len(body))
				}
			})
		}
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	f := start(t, nil, fixtureConfig{upstreamURL: "http://" + addr + "/base"})
	for proto, client := range f.clients() {
		t.Run(proto, func(t *testing.T) {
			resp, body, err := get(t, client, f.url("/x"))
			if err != nil {
				t.Fatal(err)
			}
			wantOneLine(t, resp, body, http.StatusBadGateway, "upstream http://"+addr+"/base: GET /base/x: dial tcp", "connection refused")
		})
	}
}

func TestNoTunnelIsGatewayTimeout(t *testing.T) {
	// Agent 2 is connected but serves no HTTP; agent 77 is not connected at all.
	f := start(t, nil, fixtureConfig{agents: 2, findTimeout: 200 * time.Millisecond})
	for proto, client := range f.clients() {
		for _, id := range []string{"2", "77"} {
			t.Run(proto+"/agent-"+id, func(t *testing.T) {
				resp, body, err := get(t, client, f.kasURL+"/agents/"+id+"/x")
				if err != nil {
					t.Fatal(err)
				}
				wantOneLine(t, resp, body, http.StatusGatewayTimeout, "gateway timeout: no tunnel to agent "+id)
			})
		}
	}
}

func TestBadRequests(t *testing.T) {
	f := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "root saw "+r.URL.Path)
	}), fixtureConfig{})
	for _, tc := range []struct {
		path      string
		header    []string
		code      int
		fragments []string
	}{
		{"/agents/abc/x", nil, http.StatusBadRequest, []string{`agent id "abc" is not a decimal int64`}},
		{"/agents/", nil, http.StatusBadRequest, []string{`agent id "" is not`}},
		{"/agents/+1/", nil, http.StatusBadRequest, []string{`agent id "+1"`}},
		{"/agents/99999999999999999999/", nil, http.StatusBadRequest, []string{"is not a decimal int64"}},
		{"/elsewhere", nil, http.StatusNotFound, []string{"/agents/{agentID}/{path}"}},
		{"/agents/1/ws", []string{"Connection", "Upgrade", "Upgrade", "websocket"}, http.StatusNotImplemented, []string{"WebSocket"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, body, err := get(t, f.h1, f.kasURL+tc.path, tc.header...)
			if err != nil {
				t.Fatal(err)
			}
			wantOneLine(t, resp, body, tc.code, tc.fragments...)
		})
	}
	t.Run("agent root without slash", func(t *testing.T) {
		resp, body, err := get(t, f.h1, f.kasURL+"/agents/1")
		if err != nil || resp.StatusCode != http.StatusOK || body != "root saw /" {
			t.Fatalf("status %d, %q, %v", resp.StatusCode, body, err)
		}
	})
}

// TestNoPathLeavesUpstreamBase sends every traversal form through kas as a client can (raw, as curl
// --path-as-is does), and straight to the agent as a hostile kas could: the upstream, whose base path is
// /base/, never sees a path that resolves outside it. kas refuses with 400 before calling the agent, the
// agent with InvalidArgument; the look-alikes reach the upstream as sent.
func TestNoPathLeavesUpstreamBase(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	f := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		_, _ = io.WriteString(w, "saw "+r.URL.EscapedPath())
	}), fixtureConfig{upstreamPath: "/base/"})
	for proto, client := range f.clients() {
		// The path goes on the wire exactly as written: Opaque is not escaped or cleaned.
		raw := func(t *testing.T, p string) (*http.Response, string) {
			req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, f.kasURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = "/agents/1" + p
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return resp, string(body)
		}
		for _, tc := range httptunnel.TraversalForms {
			t.Run(proto+"/refused"+tc.Path, func(t *testing.T) {
				resp, body := raw(t, tc.Path)
				wantOneLine(t, resp, body, http.StatusBadRequest, "bad request: path segment", tc.Says)
			})
		}
		for _, p := range httptunnel.LegitForms {
			t.Run(proto+"/passed"+p, func(t *testing.T) {
				resp, body := raw(t, p)
				if resp.StatusCode != http.StatusOK || body != "saw /base"+p {
					t.Fatalf("%d %q, want 200 %q", resp.StatusCode, body, "saw /base"+p)
				}
			})
		}
	}
	for _, tc := range httptunnel.TraversalForms {
		t.Run("hostile kas"+tc.Path, func(t *testing.T) {
			stream, err := httptunnel.NewHTTPTunnelClient(f.env.Kas.InternalConn()).Exchange(testenv.AgentCtx(ctx(t), 1))
			if err != nil {
				t.Fatal(err)
			}
			_ = stream.Send(&httptunnel.HTTPRequest{Msg: &httptunnel.HTTPRequest_Header_{Header: &httptunnel.HTTPRequest_Header{Method: http.MethodGet, Path: tc.Path}}})
			_ = stream.Send(&httptunnel.HTTPRequest{Msg: &httptunnel.HTTPRequest_End_{End: &httptunnel.HTTPRequest_End{}}})
			_ = stream.CloseSend()
			for err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.Says) {
				t.Fatalf("got %v, want InvalidArgument saying %q", err, tc.Says)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	// Resolved as a file server would, a backslash taken for a slash as some do.
	for _, p := range seen {
		if r := path.Clean(strings.ReplaceAll(p, `\`, "/")); !strings.HasPrefix(r+"/", "/base/") {
			t.Errorf("the upstream saw %q, which resolves to %q, outside /base/", p, r)
		}
	}
	if want := len(f.clients()) * len(httptunnel.LegitForms); len(seen) != want {
		t.Errorf("the upstream saw %d requests, want %d (the look-alikes only): %q", len(seen), want, seen)
	}
}

// misbehaving is an agent-side HTTPTunnel service that answers with whatever a test wants.
type misbehaving struct {
	httptunnel.UnimplementedHTTPTunnelServer
	answer func(stream httptunnel.HTTPTunnel_ExchangeServer) error
}

func (m misbehaving) Exchange(stream httptunnel.HTTPTunnel_ExchangeServer) error {
	return m.answer(stream)
}

func header(code int) *httptunnel.HTTPResponse {
	return &httptunnel.HTTPResponse{Msg: &httptunnel.HTTPResponse_Header_{Header: &httptunnel.HTTPResponse_Header{StatusCode: int32(code), ContentLength: -1}}}
}

// inlined is a response header with the whole body inside it.
func inlined(contentLength int64, s string) *httptunnel.HTTPResponse {
	return &httptunnel.HTTPResponse{Msg: &httptunnel.HTTPResponse_Header_{Header: &httptunnel.HTTPResponse_Header{StatusCode: 200, ContentLength: contentLength, Body: []byte(s)}}}
}

func body(s string) *httptunnel.HTTPResponse {
	return &httptunnel.HTTPResponse{Msg: &httptunnel.HTTPResponse_Body{Body: &httptunnel.BodyChunk{Data: []byte(s)}}}
}

// TestAgentProtocolViolations: kas checks the order of what the agent sends. Before the response
// started, a violation is a 502 naming both states; after, the response is aborted.
func TestAgentProtocolViolations(t *testing.T) {
	answers := map[string]func(httptunnel.HTTPTunnel_ExchangeServer) error{
		"/body-first":       func(s httptunnel.HTTPTunnel_ExchangeServer) error { return s.Send(body("x")) },
		"/bad-status":       func(s httptunnel.HTTPTunnel_ExchangeServer) error { return s.Send(header(42)) },
		"/inline-longer":    func(s httptunnel.HTTPTunnel_ExchangeServer) error { return s.Send(inlined(5, "more than five")) },
		"/inline-no-length": func(s httptunnel.HTTPTunnel_ExchangeServer) error { return s.Send(inlined(-1, "x")) },
		"/chunk-after-inline": func(s httptunnel.HTTPTunnel_ExchangeServer) error {
			if err := s.Send(inlined(4, "four")); err != nil {
				return err
			}
			return s.Send(body("and more"))
		},
		"/no-end": func(s httptunnel.HTTPTunnel_ExchangeServer) error {
			if err := s.Send(header(200)); err != nil {
				return err
			}
			return s.Send(body("looks complete"))
		},
		"/two-headers": func(s httptunnel.HTTPTunnel_ExchangeServer) error {
			if err := s.Send(header(200)); err != nil {
				return err
			}
			return s.Send(header(200))
		},
		"/error-after-header": func(s httptunnel.HTTPTunnel_ExchangeServer) error {
			if err := s.Send(header(200)); err != nil {
				return err
			}
			if err := s.Send(body("partial")); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "upstream went away")
		},
	}
	f := start(t, nil, fixtureConfig{register: func(a *tunclient.Agent) {
		httptunnel.RegisterHTTPTunnelServer(a, misbehaving{answer: func(s httptunnel.HTTPTunnel_ExchangeServer) error {
			m, err := s.Recv()
			if err != nil {
				return err
			}
			return answers[m.GetHeader().GetPath()](s)
		}})
	}})
	for proto, client := range f.clients() {
		t.Run(proto+"/before-header", func(t *testing.T) {
			resp, body, err := get(t, client, f.url("/body-first"))
			if err != nil {
				t.Fatal(err)
			}
			wantOneLine(t, resp, body, http.StatusBadGateway, "bad gateway: agent 1: the agent broke the http tunnel protocol", "agent->kas http response: body is not allowed after start")
			resp, body, err = get(t, client, f.url("/bad-status"))
			if err != nil {
				t.Fatal(err)
			}
			wantOneLine(t, resp, body, http.StatusBadGateway, "status code 42 is not a final HTTP status")
			for _, path := range []string{"/inline-longer", "/inline-no-length"} {
				resp, body, err = get(t, client, f.url(path))
				if err != nil {
					t.Fatal(err)
				}
				wantOneLine(t, resp, body, http.StatusBadGateway, "the agent broke the http tunnel protocol", "inside the response header, which says content length")
			}
		})
		t.Run(proto+"/chunk-after-inline", func(t *testing.T) {
			// The header and its whole body went out; kas aborts the exchange without writing the extra
			// chunk (HTTP/1 has already sent all the declared length, HTTP/2 resets the stream).
			resp, body, err := get(t, client, f.url("/chunk-after-inline"))
			if resp == nil || resp.StatusCode != http.StatusOK || strings.Contains(body, "more") || (err == nil && body != "four") {
				t.Fatalf("response %v, body %q, err %v; want 200 and the inline body, never the extra chunk", resp, body, err)
			}
		})
		for _, path := range []string{"/no-end", "/two-headers", "/error-after-header"} {
			t.Run(proto+path, func(t *testing.T) {
				resp, body, err := get(t, client, f.url(path))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d", resp.StatusCode)
				}
				if err == nil {
					t.Fatalf("the client read %q as a complete body", body)
				}
			})
		}
	}
}

// TestKasProtocolViolations: the agent checks the order of what kas sends and answers violations with
// InvalidArgument naming both states.
func TestKasProtocolViolations(t *testing.T) {
	f := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/until-cancelled" {
			// Answers only once the exchange ends: what kas sends after the request's end is read
			// before the exchange can end cleanly.
			select {
			case <-r.Context().Done():
			case <-time.After(testTimeout):
			}
		}
	}), fixtureConfig{})
	reqHeaderTo := func(path string, contentLength int64) *httptunnel.HTTPRequest {
		return &httptunnel.HTTPRequest{Msg: &httptunnel.HTTPRequest_Header_{Header: &httptunnel.HTTPRequest_Header{
			Method: http.MethodPost, Path: path, ContentLength: contentLength,
		}}}
	}
	reqHeader := func(contentLength int64) *httptunnel.HTTPRequest { return reqHeaderTo("/", contentLength) }
	reqBody := &httptunnel.HTTPRequest{Msg: &httptunnel.HTTPRequest_Body{Body: &httptunnel.BodyChunk{Data: []byte("0123456789")}}}
	end := &httptunnel.HTTPRequest{Msg: &httptunnel.HTTPRequest_End_{End: &httptunnel.HTTPRequest_End{}}}
	for _, tc := range []struct {
		name string
		send []*httptunnel.HTTPRequest
		want string
	}{
		{"body first", []*httptunnel.HTTPRequest{reqBody}, "kas->agent http request: body is not allowed after start"},
		{"empty message", []*httptunnel.HTTPRequest{{}}, "kas->agent http request: empty message is not allowed after start"},
		{"body after end", []*httptunnel.HTTPRequest{reqHeaderTo("/until-cancelled", -1), end, reqBody}, "kas->agent http request: body is not allowed after end"},
		{"header twice", []*httptunnel.HTTPRequest{reqHeader(-1), reqHeader(-1)}, "kas->agent http request: header is not allowed after header"},
		{"longer than announced", []*httptunnel.HTTPRequest{reqHeader(5), reqBody}, "request body is longer than its content length 5"},
		{"shorter than announced", []*httptunnel.HTTPRequest{reqHeader(50), reqBody, end}, "request body has 10 bytes, its content length is 50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cancel := context.WithTimeout(ctx(t), testTimeout)
			defer cancel()
			stream, err := httptunnel.NewHTTPTunnelClient(f.env.Kas.InternalConn()).Exchange(testenv.AgentCtx(c, 1))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.send {
				if err := stream.Send(m); err != nil {
					break // the agent already answered; Recv has its status
				}
			}
			for {
				_, err = stream.Recv()
				if err != nil {
					break
				}
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("got %v, want InvalidArgument saying %q", err, tc.want)
			}
		})
	}
	// The end of the stream before the end of the body is a violation too.
	t.Run("EOF after header", func(t *testing.T) {
		stream, err := httptunnel.NewHTTPTunnelClient(f.env.Kas.InternalConn()).Exchange(testenv.AgentCtx(ctx(t), 1))
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(reqHeader(-1)); err != nil {
			t.Fatal(err)
		}
		_ = stream.CloseSend()
		for err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "EOF is not allowed after header") {
			t.Fatalf("got %v", err)
		}
	})
}
