package httptunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
	"github.com/tunnelbench/tunnelbench/core/workers"
)

// Handler is the kas side: it forwards HTTP requests for PathPrefix + "{agentID}/{rest}" to that agent
// as requests for "/{rest}", through conn (kas's InternalConn).
type Handler struct {
	client  HTTPTunnelClient
	opts    options
	workers *workers.Pool // upload request bodies
}

// NewHandler returns the kas-side handler. conn routes calls to agents by the
// kas-hop-routing-agent-id metadata: kas.Server.InternalConn().
func NewHandler(conn grpc.ClientConnInterface, opts ...Option) *Handler {
	return &Handler{client: NewHTTPTunnelClient(conn), opts: newOptions(opts), workers: workers.New()}
}

// ParsePath splits an escaped request path PathPrefix + "{agentID}/{rest}" into the agent id and the
// escaped path "/{rest}" for the agent. "/agents/{agentID}" alone is the agent's "/". A path outside
// PathPrefix is ok=false with a nil error; a bad agent id is an error, and so is a rest that could lead
// out of the upstream's base path (a dot segment, an encoded slash, a backslash, NUL: see checkPath).
func ParsePath(escapedPath string) (agentID int64, rest string, ok bool, err error) {
	after, found := strings.CutPrefix(escapedPath, PathPrefix)
	if !found {
		return 0, "", false, nil
	}
	id, rest, _ := strings.Cut(after, "/")
	agentID, err = strconv.ParseInt(id, 10, 64)
	if err != nil || strconv.FormatInt(agentID, 10) != id { // one spelling per agent: no "+1", no "01"
		return 0, "", true, fmt.Errorf("agent id %q is not a decimal int64", truncate(id, 64))
	}
	if err := checkPath(rest); err != nil {
		return 0, "", true, err
	}
	return agentID, "/" + rest, true, nil
}

// ServeHTTP forwards one request. Before the response started, failures are answered with a one-line
// plain-text reason: 400 for a bad path (before any call to the agent) or request body (413 for a body
// cut by a limit), 504 when no tunnel to the agent showed up in time, 502 otherwise (after kas's
// unserved grace, not the find timeout, when the agent is connected but serves no HTTP). After it started, a
// failure aborts the response (the connection is closed, or the HTTP/2 stream reset), so that a client
// never takes a truncated body for a complete one.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	agentID, path, ok, err := ParsePath(r.URL.EscapedPath())
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "not found: requests through the tunnel go to "+PathPrefix+"{agentID}/{path}")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "bad request: "+err.Error())
		return
	case r.Method == http.MethodConnect:
		writeError(w, http.StatusMethodNotAllowed, "method not allowed: CONNECT is not carried through the tunnel")
		return
	case isUpgrade(r.Header):
		writeError(w, http.StatusNotImplemented, "not implemented: protocol upgrades (WebSocket and others) are not carried through the tunnel")
		return
	}
	ex := &exchange{
		h:       h,
		w:       w,
		r:       r,
		rc:      http.NewResponseController(w),
		agentID: agentID,
		log:     h.opts.log.With("agent_id", agentID, "method", r.Method, "path", path),
	}
	ex.run(path)
}

// exchange is one request on its way through the tunnel.
type exchange struct {
	h       *Handler
	w       http.ResponseWriter
	r       *http.Request
	rc      *http.ResponseController
	agentID int64
	log     *slog.Logger

	cancel     context.CancelFunc
	uploadDone chan struct{}
	uploadErr  error // set before uploadDone closes: the request body could not be read
	started    bool  // the response header went to the client
	inlined    bool  // the whole body came inside the response header: no chunk may follow

	readMu  sync.Mutex
	reading bool // the uploader is inside Body.Read
}

func (ex *exchange) run(path string) {
	r := ex.r
	ctx, cancel := context.WithCancel(r.Context())
	ex.cancel = cancel
	defer cancel()
	ex.uploadDone = make(chan struct{})
	ctx = metadata.AppendToOutgoingContext(ctx, rpc.RoutingAgentIDMetadataKey, strconv.FormatInt(ex.agentID, 10), rpc.HTTPInlineBodyMetadataKey, "1")
	contentLength := r.ContentLength
	if r.Body == nil || r.Body == http.NoBody {
		contentLength = 0
	}
	if contentLength == 0 {
		// Header and end, then the half-close, all sent below before anything is awaited: kas may read
		// them at once and send the agent the whole request as one batch.
		ctx = request.WithWholeRequest(ctx, 2)
	}
	stream, err := ex.h.client.Exchange(ctx)
	if err != nil {
		close(ex.uploadDone)
		ex.fail(err)
		return
	}
	// HTTP/1 may then read the request body while the response streams (HTTP/2 always can).
	_ = ex.rc.EnableFullDuplex()

	reqHeader := wireHeader(r.Header, "Expect") // kas answers "100-continue" itself by reading the body
	reqHeader = addWire(reqHeader, "Via", viaValue(r.ProtoMajor, r.ProtoMinor, ex.h.opts.via))
	err = stream.Send(&HTTPRequest{Msg: &HTTPRequest_Header_{Header: &HTTPRequest_Header{
		Method:        r.Method,
		Path:          path,
		RawQuery:      r.URL.RawQuery,
		Header:        reqHeader,
		ContentLength: contentLength,
		Host:          r.Host,
	}}})
	if err != nil {
		close(ex.uploadDone)
		ex.fail(recvErr(stream, err))
		return
	}
	if contentLength == 0 {
		// Nothing to read from the client: the request's end follows its header at once, with no
		// goroutine to hand it to (the in-process stream takes both without blocking).
		ex.upload(ctx, stream, 0)
	} else {
		ex.h.workers.Go(func() { ex.upload(ctx, stream, contentLength) })
	}
	ex.download(stream)
}

// upload streams the request body to the agent in bounded chunks, then ends it. A body that cannot be
// read whole cancels the call: the agent must not take what arrived for the whole body.
func (ex *exchange) upload(ctx context.Context, stream HTTPTunnel_ExchangeClient, contentLength int64) {
	defer close(ex.uploadDone)
	if contentLength != 0 {
		bp := ex.h.opts.buffer()
		defer ex.h.opts.putBuffer(bp)
		buf := *bp
		for {
			n, err := ex.readBody(ctx, buf)
			if n > 0 {
				// The message must not change after Send: each chunk is its own.
				chunk := make([]byte, n)
				copy(chunk, buf[:n])
				if stream.Send(&HTTPRequest{Msg: &HTTPRequest_Body{Body: &BodyChunk{Data: chunk}}}) != nil {
					return // the call is over; its status comes from Recv
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				if ctx.Err() == nil {
					ex.uploadErr = err
					ex.cancel()
				}
				return
			}
		}
	}
	if stream.Send(&HTTPRequest{Msg: &HTTPRequest_End_{End: &HTTPRequest_End{}}}) == nil {
		_ = stream.CloseSend()
	}
}

// readBody reads the request body unless the call is over. stopUpload sees whether a read is under way.
func (ex *exchange) readBody(ctx context.Context, buf []byte) (int, error) {
	ex.readMu.Lock()
	if err := ctx.Err(); err != nil {
		ex.readMu.Unlock()
		return 0, err
	}
	ex.reading = true
	ex.readMu.Unlock()
	n, err := ex.r.Body.Read(buf)
	ex.readMu.Lock()
	ex.reading = false
	ex.readMu.Unlock()
	return n, err
}

// download streams the agent's response to the client, flushing every chunk.
func (ex *exchange) download(stream HTTPTunnel_ExchangeClient) {
	checker := rpc.NewChecker(ResponseOrder)
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			if err := checker.Next(rpc.StateEOF); err != nil {
				ex.fail(ex.violation(err))
				return
			}
			ex.finish()
			return
		}
		if err != nil {
			ex.fail(err)
			return
		}
		if err := checker.Next(ResponseState(m)); err != nil {
			ex.fail(ex.violation(err))
			return
		}
		switch x := m.GetMsg().(type) {
		case *HTTPResponse_Header_:
			if err := ex.writeHeader(x.Header); err != nil {
				ex.fail(ex.violation(err))
				return
			}
			if ex.inlined && !ex.writeBody(x.Header.GetBody()) {
				return
			}
		case *HTTPResponse_Body:
			if ex.inlined {
				ex.fail(ex.violation(status.Error(codes.InvalidArgument, "a body chunk after the whole body came inside the response header")))
				return
			}
			if !ex.writeBody(x.Body.GetData()) {
				return
			}
		case *HTTPResponse_End_:
			for k, vv := range fromWire(x.End.GetTrailer()) {
				ex.w.Header()[http.TrailerPrefix+k] = vv
			}
		}
	}
}

func (ex *exchange) writeHeader(m *HTTPResponse_Header) error {
	code := int(m.GetStatusCode())
	if code < 200 || code > 999 {
		return status.Errorf(codes.InvalidArgument, "status code %d is not a final HTTP status", code)
	}
	h := ex.w.Header()
	for k, vv := range headerFromWire(m.GetHeader()) {
		h[k] = vv
	}
	h.Add("Via", viaValue(int(m.GetProtoMajor()), int(m.GetProtoMinor()), ex.h.opts.via))
	if cl := m.GetContentLength(); cl >= 0 && bodyAllowed(code) {
		h.Set("Content-Length", strconv.FormatInt(cl, 10))
	}
	body := m.GetBody()
	if len(body) > 0 && (int64(len(body)) != m.GetContentLength() || !bodyAllowed(code)) {
		return status.Errorf(codes.InvalidArgument, "a body of %d bytes inside the response header, which says content length %d and status %d", len(body), m.GetContentLength(), code)
	}
	ex.w.WriteHeader(code)
	ex.started = true
	ex.inlined = len(body) > 0
	if ex.inlined {
		return nil // the header leaves with the body, in one write (writeBody)
	}
	// The client sees the header now, even when the body takes its time (server-sent events).
	if err := ex.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		ex.log.Debug("flush response header", "err", err)
	}
	return nil
}

// writeBody writes part of the response body and flushes it (with the header, the first time); it
// reports whether the client is still there.
func (ex *exchange) writeBody(b []byte) bool {
	if _, err := ex.w.Write(b); err != nil {
		ex.clientGone(err)
		return false
	}
	if err := ex.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		ex.clientGone(err)
		return false
	}
	return true
}

func bodyAllowed(code int) bool {
	return code != http.StatusNoContent && code != http.StatusNotModified
}

func (ex *exchange) violation(err error) error {
	ex.log.Warn("agent broke the http tunnel protocol", "err", err)
	return status.Errorf(codes.Unavailable, "the agent broke the http tunnel protocol: %s", status.Convert(err).Message())
}

// finish ends a complete exchange: the agent's answer arrived whole.
func (ex *exchange) finish() {
	ex.stopUpload()
}

// stopUpload cancels the call and waits for the uploader; it reports whether the uploader ended. An
// uploader blocked reading the request body (the agent answered without reading it all) is woken by a
// read deadline, as the body cannot be read once the handler returns. Without read deadlines (an exotic
// ResponseWriter) it is left to end on its own.
func (ex *exchange) stopUpload() bool {
	ex.cancel()
	ex.readMu.Lock()
	reading := ex.reading
	ex.readMu.Unlock()
	if reading {
		if err := ex.rc.SetReadDeadline(time.Now()); err != nil {
			ex.log.Debug("cannot interrupt the request body", "err", err)
			return false
		}
	}
	<-ex.uploadDone
	return true
}

// clientGone ends an exchange whose client went away while the response streamed.
func (ex *exchange) clientGone(err error) {
	ex.log.Debug("client went away", "err", err)
	ex.stopUpload()
	panic(http.ErrAbortHandler)
}

// fail ends an exchange that failed: with an error response before the response started, by aborting
// it after.
func (ex *exchange) fail(err error) {
	uploadEnded := ex.stopUpload()
	if ex.started {
		ex.log.Debug("response aborted", "err", err)
		panic(http.ErrAbortHandler)
	}
	if ex.r.Context().Err() != nil {
		return // the client went away; nobody reads an answer
	}
	if uploadEnded && ex.uploadErr != nil {
		// A body cut by a limit (http.MaxBytesReader, which kas puts on it) is the client's too-large body,
		// whether its size was announced or not: the same 413 as a Content-Length over the limit gets.
		var tooLarge *http.MaxBytesError
		if errors.As(ex.uploadErr, &tooLarge) {
			writeError(ex.w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: the limit is %d bytes", tooLarge.Limit))
			return
		}
		writeError(ex.w, http.StatusBadRequest, "bad request: read request body: "+ex.uploadErr.Error())
		return
	}
	st := status.Convert(err)
	if st.Code() == codes.Unimplemented {
		ex.log.Debug("agent serves no HTTP", "err", err)
		writeError(ex.w, http.StatusBadGateway, fmt.Sprintf("bad gateway: agent %d does not serve HTTP (agentk runs without --http-upstream): %s", ex.agentID, st.Message()))
		return
	}
	if st.Code() == codes.DeadlineExceeded {
		ex.log.Debug("no tunnel", "err", err)
		writeError(ex.w, http.StatusGatewayTimeout, "gateway timeout: "+st.Message())
		return
	}
	ex.log.Debug("exchange failed", "err", err)
	writeError(ex.w, http.StatusBadGateway, fmt.Sprintf("bad gateway: agent %d: %s", ex.agentID, st.Message()))
}

// recvErr is the call's status after Send failed: gRPC reports it on Recv.
func recvErr(stream HTTPTunnel_ExchangeClient, err error) error {
	if err != io.EOF {
		return err
	}
	for {
		if _, rerr := stream.Recv(); rerr != nil {
			if rerr == io.EOF {
				return status.Error(codes.Unavailable, "the agent ended the exchange before the request was sent")
			}
			return rerr
		}
	}
}

// writeError answers with a one-line plain-text reason.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, oneLine(msg), code)
}

// isUpgrade reports a request for a protocol upgrade other than h2c (which only offers HTTP/2 and may
// be ignored).
func isUpgrade(h http.Header) bool {
	for _, v := range h.Values("Upgrade") {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !strings.EqualFold(p, "h2c") {
				return true
			}
		}
	}
	return false
}

var _ http.Handler = (*Handler)(nil)
