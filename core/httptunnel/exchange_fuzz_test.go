package httptunnel

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// The input of FuzzExchange is one flags byte, then frames: a uvarint length and that many bytes of one
// protobuf message. A frame that does not fit or does not decode breaks the stream there; after the last
// frame the stream ends cleanly (EOF). The seed files in testdata/fuzz/FuzzExchange are in this form.
const (
	// fuzzAgentSide: the frames are HTTPRequest messages (what kas sends), fed to the agent's Upstream.
	// Without it they are HTTPResponse messages (what an agent sends), fed to kas's Handler.
	fuzzAgentSide = 1 << iota
	// fuzzWithBody: agent side, the upstream reads the request body to its end (without it, it answers
	// at once and closes the body); kas side, the client's request has a body.
	fuzzWithBody
)

// fuzzHang bounds one exchange: a fuzz input never makes either side wait for more input.
const fuzzHang = 10 * time.Second

// FuzzExchange feeds arbitrary message sequences to both sides of an HTTP exchange through the real code:
// the agent's Upstream reading what kas sends (order checker, request header conversion, request body
// length checks) and kas's Handler reading what an agent sends (order checker, status check, response
// header conversion). Neither side panics (kas aborts a started response with http.ErrAbortHandler only)
// or waits for more; failures are specific; hop-by-hop fields never cross; and neither side ever takes a
// sequence that broke the order, or a body of the wrong length, for a complete message.
func FuzzExchange(f *testing.F) {
	f.Add(fuzzFrames(fuzzAgentSide|fuzzWithBody,
		&HTTPRequest{Msg: &HTTPRequest_Header_{Header: &HTTPRequest_Header{Method: "POST", Path: "/a", ContentLength: 2}}},
		&HTTPRequest{Msg: &HTTPRequest_Body{Body: &BodyChunk{Data: []byte("hi")}}},
		&HTTPRequest{Msg: &HTTPRequest_End_{End: &HTTPRequest_End{}}}))
	// A hostile kas sending paths that lead out of the base path: the agent refuses them itself.
	for _, p := range []string{"/../secret", "/a/%2e%2e/%2e%2e/secret", "/..%2fsecret", `/..\secret`} {
		f.Add(fuzzFrames(fuzzAgentSide,
			&HTTPRequest{Msg: &HTTPRequest_Header_{Header: &HTTPRequest_Header{Method: "GET", Path: p}}},
			&HTTPRequest{Msg: &HTTPRequest_End_{End: &HTTPRequest_End{}}}))
	}
	f.Add(fuzzFrames(fuzzWithBody,
		&HTTPResponse{Msg: &HTTPResponse_Header_{Header: &HTTPResponse_Header{StatusCode: 200, ContentLength: -1}}},
		&HTTPResponse{Msg: &HTTPResponse_Body{Body: &BodyChunk{Data: []byte("ok")}}},
		&HTTPResponse{Msg: &HTTPResponse_End_{End: &HTTPResponse_End{}}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		flags, frames := in[0], in[1:]
		if flags&fuzzAgentSide != 0 {
			msgs, broken := decodeFrames[HTTPRequest](frames)
			fuzzUpstream(t, msgs, broken, flags&fuzzWithBody != 0)
		} else {
			msgs, broken := decodeFrames[HTTPResponse](frames)
			fuzzHandler(t, msgs, broken, flags&fuzzWithBody != 0)
		}
	})
}

// fuzzFrames encodes a fuzz input: flags, then each message as a frame.
func fuzzFrames(flags byte, msgs ...proto.Message) []byte {
	out := []byte{flags}
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		out = binary.AppendUvarint(out, uint64(len(b)))
		out = append(out, b...)
	}
	return out
}

// decodeFrames decodes frames as messages of type T; broken reports frames that did not fit or decode.
func decodeFrames[T any, PT interface {
	*T
	proto.Message
}](b []byte) (msgs []PT, broken bool) {
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return msgs, true
		}
		m := PT(new(T))
		if err := proto.Unmarshal(b[k:k+int(n)], m); err != nil {
			return msgs, true
		}
		msgs = append(msgs, m)
		b = b[k+int(n):]
	}
	return msgs, false
}

// ---- agent side ----

// fuzzUpstream runs Upstream.Exchange on msgs, as kas would send them, against an in-memory upstream.
func fuzzUpstream(t *testing.T, msgs []*HTTPRequest, broken, readBody bool) {
	up := &fuzzUpstreamServer{readBody: readBody}
	u, err := NewUpstream(&url.URL{Scheme: "http", Host: "upstream.test", Path: "/base"}, WithChunkSize(3),
		WithHTTPClient(&http.Client{Transport: up, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := &fuzzServerStream{ctx: ctx, cancel: cancel, in: msgs, broken: broken}
	done := make(chan error, 1)
	go func() { done <- u.Exchange(stream) }()
	select {
	case err = <-done:
	case <-time.After(fuzzHang):
		t.Fatalf("Exchange still runs after %s", fuzzHang)
	}
	cancel() // as gRPC does when the handler returns

	// What kas sent, by the order table: in order through the first end, and the body up to there.
	var (
		hdr     = first(msgs).GetHeader()
		checker = rpc.NewChecker(RequestOrder)
		ordered = true
		ended   = false
		body    []byte
	)
	for _, m := range msgs {
		if ended {
			break
		}
		if checker.Next(RequestState(m)) != nil {
			ordered = false
			break
		}
		body = append(body, m.GetBody().GetData()...)
		ended = m.GetEnd() != nil
	}
	cl := hdr.GetContentLength()
	complete := ordered && ended && (cl < 0 || int64(len(body)) == cl)

	if err != nil {
		st, ok := status.FromError(err)
		msg := st.Message()
		switch {
		case !ok:
			t.Fatalf("Exchange: %v (%T), want a status", err, err)
		case msg == "" || strings.Contains(msg, "\n"):
			t.Fatalf("Exchange: message %q is not one line", msg)
		case st.Code() == codes.InvalidArgument:
			if !specificRequestError(msg) {
				t.Fatalf("Exchange: %q does not say what kas did wrong", msg)
			}
		case st.Code() == codes.Unavailable:
			if !strings.HasPrefix(msg, "upstream http://upstream.test/base: ") {
				t.Fatalf("Exchange: %q does not name the upstream", msg)
			}
		case st.Code() == codes.Canceled:
			if !broken {
				t.Fatalf("Exchange: %v on a stream that did not break", err)
			}
		default:
			t.Fatalf("Exchange: %v, want InvalidArgument, Unavailable or Canceled", err)
		}
	}

	// The agent's answer: in order, never ended when the exchange failed, no hop-by-hop fields.
	sent := stream.sentResponses()
	if sentEnd := len(sent) > 0 && sent[len(sent)-1].GetEnd() != nil; sentEnd != (err == nil) {
		t.Fatalf("Exchange returned %v, but the response end was sent: %v", err, sentEnd)
	}
	rc := rpc.NewChecker(ResponseOrder)
	for _, m := range sent {
		if err := rc.Next(ResponseState(m)); err != nil {
			t.Fatalf("the agent broke its own order: %v", err)
		}
		if h := m.GetHeader(); h != nil {
			noHopByHop(t, "response header sent to kas", fromWire(h.GetHeader()), nil)
		}
	}

	// The upstream: asked only after a header, under the base path, without hop-by-hop fields, and it
	// never reads a body to its end unless the body is complete.
	req, got, bodyErr := up.result()
	if req == nil {
		if err == nil {
			t.Fatal("Exchange succeeded without asking the upstream")
		}
		return
	}
	if hdr == nil {
		t.Fatalf("the upstream was asked although the first message was %s", RequestState(first(msgs)))
	}
	upHeader := req.Header.Clone()
	if host := hdr.GetHost(); host != "" {
		if upHeader.Get("X-Forwarded-Host") == "" {
			t.Fatalf("host %q did not reach the upstream as X-Forwarded-Host", host)
		}
		if upHeader.Get("X-Forwarded-Host") == host {
			upHeader.Del("X-Forwarded-Host") // the agent's own, even when Connection names it
		}
	}
	noHopByHop(t, "request header sent to the upstream", upHeader, fromWire(hdr.GetHeader()))
	// Under the base path as the upstream resolves it: decoded, dot segments applied, and a backslash
	// taken for a slash as some servers do.
	resolved := path.Clean(strings.ReplaceAll(req.URL.Path, `\`, "/"))
	if !strings.HasPrefix(req.URL.EscapedPath(), "/base/") || (resolved != "/base" && !strings.HasPrefix(resolved, "/base/")) {
		t.Fatalf("upstream path %q is not under the base path", req.URL.EscapedPath())
	}
	if cl >= 0 && int64(len(got)) > cl {
		t.Fatalf("the upstream read %d bytes, more than the content length %d", len(got), cl)
	}
	switch {
	case !readBody:
	case cl == 0:
		if len(got) != 0 || bodyErr != nil {
			t.Fatalf("content length 0, but the upstream read %q, %v", got, bodyErr)
		}
	case bodyErr == nil:
		if !complete || !bytes.Equal(got, body) {
			t.Fatalf("the upstream read %q to its end, kas sent %q (content length %d, in order %v, ended %v)", got, body, cl, ordered, ended)
		}
	case complete:
		t.Fatalf("a complete body failed to reach the upstream: %v", bodyErr)
	case err == nil:
		t.Fatalf("the upstream could not read the body (%v), but Exchange succeeded", bodyErr)
	}
}

// first is the first message, or nil.
func first[M any](msgs []*M) *M {
	if len(msgs) == 0 {
		return nil
	}
	return msgs[0]
}

// specificRequestError reports a message that names the problem with what kas sent.
func specificRequestError(msg string) bool {
	for _, prefix := range []string{RequestOrder.Name() + ": ", "request path ", "request method ", "request body "} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// noHopByHop fails when h holds a hop-by-hop field, or a field that the Connection field of from names.
func noHopByHop(t *testing.T, what string, h, from http.Header) {
	t.Helper()
	for _, k := range hopByHop {
		if _, ok := h[k]; ok {
			t.Fatalf("%s has hop-by-hop field %s: %v", what, k, h)
		}
	}
	for _, v := range from["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" && h.Get(name) != "" {
				t.Fatalf("%s has field %s, which Connection names: %v", what, name, h)
			}
		}
	}
}

// fuzzServerStream is the agent's end of an Exchange stream: it receives msgs, then ends or breaks.
type fuzzServerStream struct {
	grpc.ServerStream // not used by Upstream: calling it panics

	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	in     []*HTTPRequest
	broken bool
	sent   []*HTTPResponse
}

func (s *fuzzServerStream) Context() context.Context     { return s.ctx }
func (s *fuzzServerStream) SendHeader(metadata.MD) error { return nil }
func (s *fuzzServerStream) SetHeader(metadata.MD) error  { return nil }
func (s *fuzzServerStream) SetTrailer(metadata.MD)       {}

func (s *fuzzServerStream) sentResponses() []*HTTPResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

func (s *fuzzServerStream) Send(m *HTTPResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	s.sent = append(s.sent, m)
	return nil
}

func (s *fuzzServerStream) Recv() (*HTTPRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.in) > 0:
		m := s.in[0]
		s.in = s.in[1:]
		return m, nil
	case s.broken:
		s.cancel() // a broken stream ends the call, as it does in gRPC
		return nil, status.Error(codes.Canceled, "context canceled")
	default:
		return nil, io.EOF
	}
}

// fuzzUpstreamServer is the agent's upstream, in memory: it answers every request with a small response
// that carries hop-by-hop fields and a trailer.
type fuzzUpstreamServer struct {
	readBody bool

	mu      sync.Mutex
	req     *http.Request
	body    []byte
	bodyErr error
}

func (u *fuzzUpstreamServer) RoundTrip(r *http.Request) (*http.Response, error) {
	var (
		body []byte
		err  error
	)
	if u.readBody && r.Body != nil {
		body, err = io.ReadAll(r.Body)
	}
	if r.Body != nil {
		_ = r.Body.Close()
	}
	u.mu.Lock()
	u.req, u.body, u.bodyErr = r, body, err
	u.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Connection": {"X-Hop"}, "X-Hop": {"1"}, "Keep-Alive": {"timeout=5"}, "Content-Type": {"text/plain"}},
		Body:          io.NopCloser(strings.NewReader("answer")),
		ContentLength: 6,
		Trailer:       http.Header{"X-Sum": {"1"}, "Te": {"trailers"}},
		Request:       r,
	}, nil
}

func (u *fuzzUpstreamServer) result() (*http.Request, []byte, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.req, u.body, u.bodyErr
}

// ---- kas side ----

// fuzzHandler runs kas's Handler on one client request, with msgs as the agent's answer.
func fuzzHandler(t *testing.T, msgs []*HTTPResponse, broken, withBody bool) {
	stream := &fuzzClientStream{in: msgs, broken: broken, order: rpc.NewChecker(RequestOrder)}
	h := &Handler{client: fuzzClient{stream}, opts: newOptions(nil)}
	r := httptest.NewRequest(http.MethodGet, "/agents/1/x?q=1", nil)
	if withBody {
		r = httptest.NewRequest(http.MethodPost, "/agents/1/x?q=1", strings.NewReader("hello"))
	}
	w := &fuzzResponseWriter{ResponseRecorder: httptest.NewRecorder()}
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		h.ServeHTTP(w, r)
	}()
	var panicked any
	select {
	case panicked = <-done:
	case <-time.After(fuzzHang):
		t.Fatalf("ServeHTTP still runs after %s", fuzzHang)
	}
	if err := stream.violation(); err != nil {
		t.Fatalf("kas broke its own order: %v", err)
	}

	// The agent's answer is complete when it is header (with a final status), body*, end, EOF.
	var (
		hdr      = first(msgs).GetHeader()
		complete = !broken && hdr != nil && hdr.GetStatusCode() >= 200 && hdr.GetStatusCode() <= 999
		checker  = rpc.NewChecker(ResponseOrder)
		body     []byte
	)
	for _, m := range msgs {
		if checker.Next(ResponseState(m)) != nil {
			complete = false
			break
		}
		body = append(body, m.GetBody().GetData()...)
	}
	if checker.Next(rpc.StateEOF) != nil {
		complete = false
	}
	if len(body) > 0 && !bodyAllowed(int(hdr.GetStatusCode())) {
		complete = false // net/http refuses a body for 204 and 304: kas aborts the response
	}

	switch {
	case panicked != nil:
		if panicked != http.ErrAbortHandler {
			t.Fatalf("ServeHTTP panicked: %v", panicked)
		}
		if !w.wroteHeader {
			t.Fatal("ServeHTTP aborted a response that had not started")
		}
		if complete {
			t.Fatal("ServeHTTP aborted a complete response")
		}
	case complete:
		if w.Code != int(hdr.GetStatusCode()) || !bytes.Equal(w.Body.Bytes(), body) {
			t.Fatalf("the client got %d %q, the agent sent %d %q", w.Code, w.Body.Bytes(), hdr.GetStatusCode(), body)
		}
		resp := w.Header()
		if !strings.HasSuffix(strings.Join(resp["Via"], ", "), "kas") {
			t.Fatalf("no Via: %v", resp)
		}
		delete(resp, "Content-Length") // kas's own, from the message
		delete(resp, "Via")
		noHopByHop(t, "response header sent to the client", resp, fromWire(hdr.GetHeader()))
	default:
		// An incomplete answer never ends as if complete: before the header it is a one-line 502.
		msg := w.Body.String()
		if w.Code != http.StatusBadGateway || !strings.HasPrefix(msg, "bad gateway: agent 1: ") || strings.Count(msg, "\n") != 1 {
			t.Fatalf("an incomplete answer got %d %q, want a one-line 502", w.Code, msg)
		}
	}
}

type fuzzClient struct{ stream *fuzzClientStream }

func (c fuzzClient) Exchange(ctx context.Context, _ ...grpc.CallOption) (HTTPTunnel_ExchangeClient, error) {
	c.stream.mu.Lock()
	c.stream.ctx = ctx
	c.stream.mu.Unlock()
	return c.stream, nil
}

// fuzzClientStream is kas's end of an Exchange stream: it receives msgs, then ends or breaks. It checks
// the order of what kas sends.
type fuzzClientStream struct {
	grpc.ClientStream // not used by Handler: calling it panics

	mu         sync.Mutex
	ctx        context.Context
	in         []*HTTPResponse
	broken     bool
	order      rpc.Checker
	closedSend bool
	err        error // kas's first order violation
}

func (s *fuzzClientStream) Context() context.Context { s.mu.Lock(); defer s.mu.Unlock(); return s.ctx }

func (s *fuzzClientStream) Send(m *HTTPRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return io.EOF // gRPC: the call is over, its status comes from Recv
	}
	if s.closedSend && s.err == nil {
		s.err = errors.New("send after CloseSend")
	}
	if err := s.order.Next(RequestState(m)); err != nil && s.err == nil {
		s.err = err
	}
	return nil
}

func (s *fuzzClientStream) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closedSend = true
	if err := s.order.Next(rpc.StateEOF); err != nil && s.err == nil {
		s.err = err
	}
	return nil
}

func (s *fuzzClientStream) Recv() (*HTTPResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.in) > 0:
		m := s.in[0]
		s.in = s.in[1:]
		return m, nil
	case s.broken:
		return nil, status.Error(codes.Unavailable, "the stream broke")
	default:
		return nil, io.EOF
	}
}

func (s *fuzzClientStream) violation() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// fuzzResponseWriter is the client's end: it records whether the response started, and lets kas
// interrupt the request body (which never blocks here) as a real server does.
type fuzzResponseWriter struct {
	*httptest.ResponseRecorder
	wroteHeader bool
}

func (w *fuzzResponseWriter) WriteHeader(code int) {
	w.wroteHeader = true
	w.ResponseRecorder.WriteHeader(code)
}

func (w *fuzzResponseWriter) Write(b []byte) (int, error) {
	if len(b) == 0 && w.wroteHeader {
		return 0, nil // as net/http's server, even when the status allows no body (the recorder refuses)
	}
	w.wroteHeader = true
	return w.ResponseRecorder.Write(b)
}

func (w *fuzzResponseWriter) SetReadDeadline(time.Time) error { return nil }
