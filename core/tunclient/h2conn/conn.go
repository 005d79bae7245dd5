// Package h2conn is a gRPC client connection for an agent's tunnels to kas: gRPC's protocol on an
// HTTP/2 client of its own, written on golang.org/x/net/http2's framer and HPACK.
//
// An agent holds one connection to kas and, most of the time, one idle tunnel on it. gRPC-go's
// ClientConn runs five goroutines for that beside the agent's own (the transport's reader, writer and
// keepalive, and callback serializers), and x/net/http2's client two (the reader, and a request-body
// writer per stream that holds a 16 KiB buffer while it waits). Here a connection runs one goroutine,
// its reader; a stream's frames are written by its caller, keepalive is a timer, and an idle stream
// holds nothing but its state (see bench's profile notes for the figures). What gRPC-go does and this
// package does not: name resolution beyond one address (the agent dials one kas address, behind a
// load balancer), load balancing, retries, compression, channelz and stats handlers. Streams speak
// gRPC's wire format, so kas cannot tell the two clients apart.
package h2conn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// Options configure a Conn. Zero values mean the defaults below.
type Options struct {
	// TLS secures the connection (ALPN h2; ServerName defaults to the target's host). Nil means
	// plaintext HTTP/2 with prior knowledge, as gRPC's insecure credentials.
	TLS *tls.Config
	// Dial connects to the target's address; nil dials TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Credentials add metadata to every stream (the agent's token). Credentials that require transport
	// security are refused without TLS.
	Credentials credentials.PerRPCCredentials
	// KeepaliveTime: after this long without a frame from the server, the client pings it;
	// KeepaliveTimeout: a ping not answered in this time closes the connection. Zero KeepaliveTime
	// means DefaultKeepaliveTime, negative no pings.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// ConnectTimeout bounds a dial with its TLS handshake.
	ConnectTimeout time.Duration
	// StreamInterceptors run around NewStream, the first outermost (as grpc.WithChainStreamInterceptor).
	// They get a nil *grpc.ClientConn: an interceptor that uses it cannot run on this connection.
	StreamInterceptors []grpc.StreamClientInterceptor
	// UserAgent is sent ahead of this package's own name.
	UserAgent string
	// MaxHeaderListSize bounds the headers and trailers the server may send on one stream.
	MaxHeaderListSize uint32
	// StreamWindow and ConnectionWindow are the flow-control windows the server may fill on one
	// stream and on the connection.
	StreamWindow, ConnectionWindow int
}

// Defaults.
const (
	DefaultKeepaliveTime     = 20 * time.Second
	DefaultKeepaliveTimeout  = 10 * time.Second
	DefaultConnectTimeout    = 20 * time.Second
	DefaultMaxHeaderListSize = 64 << 10
	DefaultStreamWindow      = 4 << 20
	DefaultConnectionWindow  = 16 << 20
	// defaultMaxRecvMsgSize is gRPC's default for what a client receives.
	defaultMaxRecvMsgSize = 4 << 20
	userAgent             = "tunnelbench-h2conn"
)

// errClosing is gRPC's status for a call on a closed connection.
var errClosing = status.Error(codes.Canceled, "grpc: the client connection is closing")

// Conn is a grpc.ClientConnInterface that carries streams (and unary calls as streams) to one server
// address over one HTTP/2 connection at a time, dialed when a stream needs it: after the connection
// broke, or kas sent GOAWAY, the next stream dials again. Close ends every stream and connection.
type Conn struct {
	scheme    string
	authority string
	addr      string
	opts      Options
	userAgent string
	streamer  streamer

	dialMu sync.Mutex // one dial at a time; streams that need a connection wait for it

	mu         sync.Mutex
	cur        *transport // takes new streams
	transports map[*transport]struct{}
	closed     bool
}

var _ grpc.ClientConnInterface = (*Conn)(nil)

// New returns a connection to target: host:port, optionally prefixed with gRPC's passthrough:/// or
// dns:/// scheme. It does not dial until the first stream.
func New(target string, o Options) (*Conn, error) {
	addr, err := parseTarget(target)
	if err != nil {
		return nil, err
	}
	if o.Credentials != nil && o.Credentials.RequireTransportSecurity() && o.TLS == nil {
		return nil, fmt.Errorf("h2conn %s: the credentials require transport security, and there is no TLS configuration", target)
	}
	if o.KeepaliveTime == 0 {
		o.KeepaliveTime = DefaultKeepaliveTime
	}
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.MaxHeaderListSize == 0 {
		o.MaxHeaderListSize = DefaultMaxHeaderListSize
	}
	if o.StreamWindow <= 0 {
		o.StreamWindow = DefaultStreamWindow
	}
	if o.ConnectionWindow <= 0 {
		o.ConnectionWindow = DefaultConnectionWindow
	}
	if o.StreamWindow < initialWindow || o.ConnectionWindow < initialWindow || o.StreamWindow > maxStreamID || o.ConnectionWindow > maxStreamID {
		return nil, fmt.Errorf("h2conn %s: windows must be from %d to %d bytes", target, initialWindow, maxStreamID)
	}
	c := &Conn{
		scheme:     "http",
		authority:  addr,
		addr:       addr,
		opts:       o,
		userAgent:  strings.TrimSpace(o.UserAgent + " " + userAgent),
		transports: make(map[*transport]struct{}),
	}
	if o.TLS != nil {
		c.scheme = "https"
	}
	c.streamer = chainStreamers(c.newStream, o.StreamInterceptors)
	return c, nil
}

// parseTarget accepts what the agent's gRPC-go connection accepted for one address.
func parseTarget(target string) (string, error) {
	addr := target
	for _, prefix := range []string{"passthrough:///", "passthrough:", "dns:///"} {
		if rest, ok := strings.CutPrefix(target, prefix); ok {
			addr = rest
			break
		}
	}
	if addr == "" || strings.Contains(addr, "/") {
		return "", fmt.Errorf("h2conn: target %q is not host:port (optionally after passthrough:/// or dns:///)", target)
	}
	return addr, nil
}

// Close closes every connection, which ends every stream on them, and refuses new streams. It
// returns once their readers did.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	ts := make([]*transport, 0, len(c.transports))
	for t := range c.transports {
		ts = append(ts, t)
	}
	c.mu.Unlock()
	for _, t := range ts {
		t.fail(errClosing)
		<-t.done
	}
	return nil
}

// forget drops a transport that failed or got GOAWAY from the streams' choice, and a failed one from
// Close's list.
func (c *Conn) forget(t *transport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == t {
		c.cur = nil
	}
	if t.failure() != nil {
		delete(c.transports, t)
	}
}

// transport is the connection that takes a new stream, dialed if there is none.
func (c *Conn) transport(ctx context.Context) (*transport, error) {
	if t := c.current(); t != nil {
		return t, nil
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	if t := c.current(); t != nil {
		return t, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	nc, err := c.dial(ctx)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Unavailable, "connection error: %v", err)
	}
	t, err := newTransport(c, nc)
	if err != nil {
		_ = nc.Close()
		return nil, status.Errorf(codes.Unavailable, "connection error: %v", err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		t.fail(errClosing)
		<-t.done
		return nil, errClosing
	}
	c.cur = t
	c.transports[t] = struct{}{}
	c.mu.Unlock()
	return t, nil
}

func (c *Conn) current() *transport {
	c.mu.Lock()
	t := c.cur
	c.mu.Unlock()
	if t != nil && t.usable() {
		return t
	}
	return nil
}

func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// dial connects to the server, with the TLS handshake if there is TLS.
func (c *Conn) dial(ctx context.Context) (net.Conn, error) {
	if c.isClosed() {
		return nil, errClosing
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	var raw net.Conn
	var err error
	if c.opts.Dial != nil {
		raw, err = c.opts.Dial(ctx, c.addr)
	} else {
		var d net.Dialer
		raw, err = d.DialContext(ctx, "tcp", c.addr)
	}
	if err != nil {
		return nil, err
	}
	if c.opts.TLS == nil {
		return raw, nil
	}
	cfg := c.opts.TLS.Clone()
	cfg.NextProtos = []string{http2.NextProtoTLS}
	if cfg.ServerName == "" {
		host, _, splitErr := net.SplitHostPort(c.addr)
		if splitErr != nil {
			host = c.addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", c.addr, err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != http2.NextProtoTLS {
		_ = raw.Close()
		return nil, fmt.Errorf("tls handshake with %s: the server did not agree to HTTP/2 (ALPN %q)", c.addr, p)
	}
	return tc, nil
}

// Invoke implements grpc.ClientConnInterface as a stream that sends one request and receives one
// response.
func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := c.NewStream(ctx, &grpc.StreamDesc{}, method, opts...)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(args); err != nil && !errors.Is(err, errEOF) {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	if err := cs.RecvMsg(reply); err != nil {
		if errors.Is(err, errEOF) {
			return status.Error(codes.Internal, "grpc: the server ended a unary call without a response")
		}
		return err
	}
	if err := cs.RecvMsg(reply); !errors.Is(err, errEOF) {
		if err == nil {
			return status.Error(codes.Internal, "grpc: the server sent more than one response to a unary call")
		}
		return err
	}
	return nil
}

// NewStream implements grpc.ClientConnInterface.
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.streamer(ctx, desc, method, opts...)
}

// streamer is grpc.Streamer without the *grpc.ClientConn this connection is not.
type streamer func(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error)

func chainStreamers(last streamer, interceptors []grpc.StreamClientInterceptor) streamer {
	s := last
	for i := len(interceptors) - 1; i >= 0; i-- {
		next, in := s, interceptors[i]
		nextStreamer := func(ctx context.Context, desc *grpc.StreamDesc, _ *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return next(ctx, desc, method, opts...)
		}
		s = func(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return in(ctx, desc, nil, method, nextStreamer, opts...)
		}
	}
	return s
}

func (c *Conn) newStream(ctx context.Context, _ *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if c.isClosed() {
		return nil, errClosing
	}
	if !strings.HasPrefix(method, "/") {
		return nil, status.Errorf(codes.Internal, "h2conn: malformed method name %q", method)
	}
	h, err := c.requestHeader(ctx, method)
	if err != nil {
		return nil, err
	}
	// A connection that got GOAWAY between the choice and the stream's slot is left for a new one,
	// once.
	for attempt := 0; ; attempt++ {
		t, err := c.transport(ctx)
		if err != nil {
			return nil, err
		}
		cs, err := newClientStream(ctx, t, h, opts)
		if errors.Is(err, errRetry) && attempt == 0 {
			continue
		}
		if errors.Is(err, errRetry) {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		return cs, err
	}
}

// requestHeader is a stream's request header: gRPC's own fields, the credentials' metadata and the
// context's outgoing metadata.
func (c *Conn) requestHeader(ctx context.Context, method string) ([]hpack.HeaderField, error) {
	h := make([]hpack.HeaderField, 0, 12)
	h = append(h,
		hpack.HeaderField{Name: ":method", Value: "POST"},
		hpack.HeaderField{Name: ":scheme", Value: c.scheme},
		hpack.HeaderField{Name: ":path", Value: method},
		hpack.HeaderField{Name: ":authority", Value: c.authority},
		hpack.HeaderField{Name: "content-type", Value: "application/grpc"},
		hpack.HeaderField{Name: "user-agent", Value: c.userAgent},
		hpack.HeaderField{Name: "te", Value: "trailers"},
	)
	if d, ok := ctx.Deadline(); ok {
		timeout := time.Until(d)
		if timeout <= 0 {
			return nil, status.FromContextError(context.DeadlineExceeded).Err()
		}
		h = append(h, hpack.HeaderField{Name: "grpc-timeout", Value: encodeTimeout(timeout)})
	}
	var err error
	if creds := c.opts.Credentials; creds != nil {
		service := method[:strings.LastIndexByte(method, '/')]
		md, mdErr := creds.GetRequestMetadata(ctx, "https://"+c.authority+service)
		if mdErr != nil {
			if _, ok := status.FromError(mdErr); ok {
				return nil, mdErr
			}
			return nil, status.Errorf(codes.Unauthenticated, "h2conn: per-RPC credentials: %v", mdErr)
		}
		for k, v := range md {
			if h, err = addMetadata(h, k, v); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
		}
	}
	if h, err = addOutgoingMetadata(ctx, h); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return h, nil
}
