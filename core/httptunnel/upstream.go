package httptunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/workers"
)

// Upstream is the agent side: it serves HTTPTunnel by forwarding every exchange to one local HTTP
// server, streaming both bodies. Close it when the agent stops.
type Upstream struct {
	UnimplementedHTTPTunnelServer

	base    *url.URL
	name    string // base, redacted, for messages
	opts    options
	owned   *http.Transport // closed by Close when the client is ours
	workers *workers.Pool   // read what kas sends while the upstream answers
}

// NewUpstream returns the service that forwards exchanges to base, an http or https URL; the request
// path is appended to base's path and the query to base's query.
func NewUpstream(base *url.URL, opts ...Option) (*Upstream, error) {
	if base == nil {
		return nil, errors.New("http upstream: URL is required")
	}
	var errs []error
	if base.Scheme != "http" && base.Scheme != "https" {
		errs = append(errs, fmt.Errorf("scheme must be http or https, got %q", base.Scheme))
	}
	if base.Host == "" {
		errs = append(errs, errors.New("host is required"))
	}
	if base.Fragment != "" {
		errs = append(errs, errors.New("a fragment is not allowed"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("http upstream %s: %w", base.Redacted(), errors.Join(errs...))
	}
	u := &Upstream{base: base, name: base.Redacted(), opts: newOptions(opts), workers: workers.New()}
	if u.opts.client == nil {
		u.owned = newUpstreamTransport()
		u.opts.client = &http.Client{
			Transport: u.owned,
			// The caller sees redirects; following them here would hide them.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return u, nil
}

// Register registers an Upstream for base on r (a *tunclient.Agent, before Start) and returns it.
func Register(r grpc.ServiceRegistrar, base *url.URL, opts ...Option) (*Upstream, error) {
	u, err := NewUpstream(base, opts...)
	if err != nil {
		return nil, err
	}
	RegisterHTTPTunnelServer(r, u)
	return u, nil
}

// newUpstreamTransport is a transport that streams: no compression (bodies pass as they are), no proxy
// from the environment, bounded response headers, no overall timeout (responses may stream for long).
func newUpstreamTransport() *http.Transport {
	return &http.Transport{
		DialContext:            (&net.Dialer{Timeout: DefaultUpstreamDialTimeout, KeepAlive: DefaultUpstreamIdleTimeout}).DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    DefaultUpstreamDialTimeout,
		MaxIdleConns:           DefaultUpstreamIdleConns,
		MaxIdleConnsPerHost:    DefaultUpstreamIdleConns,
		IdleConnTimeout:        DefaultUpstreamIdleTimeout,
		DisableCompression:     true,
		MaxResponseHeaderBytes: DefaultMaxHeaderBytes,
	}
}

// Close closes idle upstream connections of the client Upstream created. Exchanges in flight go on.
func (u *Upstream) Close() {
	if u.owned != nil {
		u.owned.CloseIdleConnections()
	}
}

// Exchange forwards one exchange. A failure before the response header is Unavailable naming the
// upstream; a failure after it is an error status too, so that kas aborts the client's response instead
// of ending it as if complete.
func (u *Upstream) Exchange(stream HTTPTunnel_ExchangeServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	checker := rpc.NewChecker(RequestOrder)
	first, err := stream.Recv()
	if err == io.EOF {
		return checker.Next(rpc.StateEOF) // says which message kas should have sent first
	}
	if err != nil {
		return err
	}
	if err := checker.Next(RequestState(first)); err != nil {
		return err
	}
	hdr := first.GetHeader()
	if hdr.GetContentLength() != 0 {
		// An empty header accepts the call at once: kas stops keeping the request for a replay on
		// another tunnel, which it would otherwise do until the upstream answered, and goes on past its
		// replay bound with a large body. A body-less request leaves kas nothing to keep: its answer
		// accepts it, and saves a tunnel message each way.
		if err := stream.SendHeader(nil); err != nil {
			return err
		}
	}
	log := u.opts.log.With("method", hdr.GetMethod(), "path", hdr.GetPath())
	// kas -> upstream: the request body through a pipe, as it arrives. The reader keeps reading after
	// the body ended (or the upstream stopped reading it), to check the order of what kas sends.
	pr, pw := io.Pipe()
	body := io.ReadCloser(pr)
	if hdr.GetContentLength() == 0 {
		body = http.NoBody
	}
	req, err := u.newRequest(ctx, hdr, body)
	if err != nil {
		return err
	}
	var (
		readMu    sync.Mutex
		violation error
	)
	u.workers.Go(func() {
		_ = readRequestBody(stream, &checker, hdr.GetContentLength(), pw, func(err error) {
			log.Warn("kas broke the http tunnel protocol", "err", err)
			readMu.Lock()
			violation = err
			readMu.Unlock()
			cancel()
		})
	})
	defer func() {
		// Wake a reader blocked writing the body. The reader itself ends with the call, once this handler
		// returns; it cannot be waited for here, as kas ends its side only after this answer is complete.
		_ = pr.CloseWithError(errors.New("exchange over"))
	}()
	failure := func(err error) error {
		readMu.Lock()
		v := violation
		readMu.Unlock()
		switch {
		case v != nil:
			return v
		case stream.Context().Err() != nil:
			return status.FromContextError(stream.Context().Err()).Err()
		default:
			return err
		}
	}

	resp, err := u.opts.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		log.Debug("upstream failed", "err", err)
		return failure(status.Errorf(codes.Unavailable, "upstream %s: %s %s: %s", u.name, req.Method, truncate(req.URL.EscapedPath(), 128), oneLine(err.Error())))
	}
	defer func() { _ = resp.Body.Close() }()
	if err := u.relay(stream, req, resp, kasReadsInlineBody(stream.Context()), log); err != nil {
		return failure(err)
	}
	return nil
}

// relay streams the upstream's response to kas: header, body chunks as they come, trailer. A small body
// of known length goes whole inside the header when kas asked for it (inline): one tunnel message and
// one write to the client instead of two of each.
func (u *Upstream) relay(stream HTTPTunnel_ExchangeServer, req *http.Request, resp *http.Response, inline bool, log *slog.Logger) error {
	hdr := &HTTPResponse_Header{
		StatusCode:    int32(resp.StatusCode),
		Header:        wireHeader(resp.Header),
		ContentLength: resp.ContentLength,
		ProtoMajor:    int32(resp.ProtoMajor),
		ProtoMinor:    int32(resp.ProtoMinor),
	}
	var early []byte // body bytes read before the header went out, when the body fell short
	var earlyErr error
	if cl := resp.ContentLength; inline && cl > 0 && cl <= int64(u.opts.chunkSize) {
		body := make([]byte, cl)
		n, err := io.ReadFull(resp.Body, body)
		switch err {
		case nil:
			hdr.Body = body
			if resp.ProtoMajor == 1 {
				// The whole answer is at hand: an HTTP/1 body ends at its content length without another
				// read of the connection. Header, end and status leave together when this handler returns.
				grpctool.HoldAnswer(stream.Context())
			}
		case io.EOF: // no body after all (a HEAD request): the loop below reads that end again
		default:
			early, earlyErr = body[:n], err
		}
	}
	if err := stream.Send(&HTTPResponse{Msg: &HTTPResponse_Header_{Header: hdr}}); err != nil {
		return err
	}
	if len(early) > 0 {
		if err := stream.Send(&HTTPResponse{Msg: &HTTPResponse_Body{Body: &BodyChunk{Data: early}}}); err != nil {
			return err
		}
	}
	if earlyErr != nil {
		return u.bodyFailed(req, earlyErr, log)
	}
	bp := u.opts.buffer()
	defer u.opts.putBuffer(bp)
	buf := *bp
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			// A message must not change after Send (stats handlers may hold it): each chunk is its own.
			chunk := make([]byte, n)
			copy(chunk, buf[:n])
			if err := stream.Send(&HTTPResponse{Msg: &HTTPResponse_Body{Body: &BodyChunk{Data: chunk}}}); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return u.bodyFailed(req, rerr, log)
		}
	}
	end := &HTTPResponse_End{Trailer: wireHeader(resp.Trailer)}
	return stream.Send(&HTTPResponse{Msg: &HTTPResponse_End_{End: end}})
}

// bodyFailed is the status of an exchange whose upstream response body broke off.
func (u *Upstream) bodyFailed(req *http.Request, err error, log *slog.Logger) error {
	log.Debug("upstream response body failed", "err", err)
	return status.Errorf(codes.Unavailable, "upstream %s: %s %s: response body: %s", u.name, req.Method, truncate(req.URL.EscapedPath(), 128), oneLine(err.Error()))
}

// kasReadsInlineBody reports whether kas asked for small bodies inside the response header.
func kasReadsInlineBody(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(rpc.HTTPInlineBodyMetadataKey)) > 0
}

// newRequest is the upstream request for hdr.
func (u *Upstream) newRequest(ctx context.Context, hdr *HTTPRequest_Header, body io.ReadCloser) (*http.Request, error) {
	target, err := u.target(hdr.GetPath(), hdr.GetRawQuery())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "request path %q: %v", truncate(hdr.GetPath(), 128), err)
	}
	req, err := http.NewRequestWithContext(ctx, hdr.GetMethod(), u.base.String(), nil)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "request method %q: %v", truncate(hdr.GetMethod(), 32), err)
	}
	req.URL = target // exactly as built, escaping included
	req.Body = body
	req.ContentLength = max(hdr.GetContentLength(), -1)
	req.Header = headerFromWire(hdr.GetHeader())
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", "") // do not let the client add its own
	}
	if h := hdr.GetHost(); h != "" && req.Header.Get("X-Forwarded-Host") == "" {
		req.Header.Set("X-Forwarded-Host", h)
	}
	return req, nil
}

// target joins the upstream's base URL and an escaped request path and query. A path that could lead
// out of the base path is refused here too: kas refuses it first, but an older or hostile kas may not.
func (u *Upstream) target(escapedPath, rawQuery string) (*url.URL, error) {
	if !strings.HasPrefix(escapedPath, "/") {
		return nil, errors.New("must start with /")
	}
	if err := checkPath(escapedPath); err != nil {
		return nil, err
	}
	path, err := url.PathUnescape(escapedPath)
	if err != nil {
		return nil, err
	}
	t := *u.base
	t.Path = strings.TrimSuffix(u.base.Path, "/") + path
	t.RawPath = strings.TrimSuffix(u.base.EscapedPath(), "/") + escapedPath
	// Whatever checkPath lets through, the path the upstream decodes must resolve under the base path.
	if !underBase(t.Path, u.base.Path) {
		return nil, fmt.Errorf("resolves outside the base path %q", u.base.Path)
	}
	switch {
	case u.base.RawQuery == "":
		t.RawQuery = rawQuery
	case rawQuery != "":
		t.RawQuery = u.base.RawQuery + "&" + rawQuery
	}
	return &t, nil
}

// readRequestBody copies the body kas sends into pw, then reads on until kas ends the stream, checking
// the order. It closes pw: cleanly at the end of a body of the announced length, with an error
// otherwise, so that the upstream never takes a truncated body for a complete one. It returns nil at a
// clean end, an InvalidArgument status for a protocol violation, or the stream's error.
//
// A violation is reported to onViolation before pw fails, so that the upstream request, which fails with
// pw, never wins the race to say what went wrong.
func readRequestBody(stream HTTPTunnel_ExchangeServer, checker *rpc.Checker, contentLength int64, pw *io.PipeWriter, onViolation func(error)) (err error) {
	defer func() {
		if err != nil {
			if s, ok := status.FromError(err); ok && s.Code() == codes.InvalidArgument {
				onViolation(err)
			}
			_ = pw.CloseWithError(err)
		}
	}()
	var got int64
	writing := contentLength != 0
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return checker.Next(rpc.StateEOF)
		}
		if err != nil {
			return err
		}
		if err := checker.Next(RequestState(m)); err != nil {
			return err
		}
		switch x := m.GetMsg().(type) {
		case *HTTPRequest_Body:
			got += int64(len(x.Body.GetData()))
			if contentLength >= 0 && got > contentLength {
				return status.Errorf(codes.InvalidArgument, "request body is longer than its content length %d", contentLength)
			}
			// Once the upstream stops reading (it answered early), the rest is read and dropped.
			if writing {
				if _, err := pw.Write(x.Body.GetData()); err != nil {
					writing = false
				}
			}
		case *HTTPRequest_End_:
			if contentLength >= 0 && got != contentLength {
				return status.Errorf(codes.InvalidArgument, "request body has %d bytes, its content length is %d", got, contentLength)
			}
			_ = pw.Close()
			writing = false
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

var _ HTTPTunnelServer = (*Upstream)(nil)
