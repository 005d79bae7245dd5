package httptunnel

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Defaults.
const (
	// DefaultListen is where kas serves HTTP for the tunnel (its --http-listen flag).
	DefaultListen = "127.0.0.1:8154"
	// PathPrefix is the path under which kas forwards requests: PathPrefix + "{agentID}/{rest}" reaches
	// agent agentID as "/{rest}".
	PathPrefix = "/agents/"
	// DefaultChunkSize bounds one body chunk on the tunnel, in both directions. A body never sits whole
	// in memory: at most a few chunks per hop do, within the tunnel's flow-control windows. It stays 1 KiB
	// under 32 KiB so that a chunk with its envelopes fits gRPC's 32 KiB buffer tier: one byte more and
	// every message takes (and zeroes) a 1 MiB buffer, which makes a transfer about five times slower.
	DefaultChunkSize = 31 << 10
	// DefaultVia is the pseudonym kas adds to Via headers.
	DefaultVia = "kas"
	// DefaultMaxHeaderBytes bounds the header of a request (kas) and of a response (agent), so that a
	// header always fits in one tunnel message (4 MiB).
	DefaultMaxHeaderBytes = 1 << 20
	// DefaultReadHeaderTimeout bounds how long a client may take to send a request header.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout closes client connections that carried no request for this long.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultUpstreamDialTimeout bounds connecting to the upstream.
	DefaultUpstreamDialTimeout = 10 * time.Second
	// DefaultUpstreamIdleConns is how many idle connections to the upstream the agent keeps.
	DefaultUpstreamIdleConns = 64
	// DefaultUpstreamIdleTimeout closes idle upstream connections.
	DefaultUpstreamIdleTimeout = 90 * time.Second
)

// options configure both sides; each option says which side uses it.
type options struct {
	chunkSize int
	via       string
	client    *http.Client
	log       *slog.Logger
	// buffers holds read buffers of chunkSize: one per exchange and direction would otherwise be
	// allocated, and zeroed, for every request.
	buffers *sync.Pool
}

// buffer returns a read buffer of chunkSize; give it back with putBuffer.
func (o *options) buffer() *[]byte {
	return o.buffers.Get().(*[]byte)
}

func (o *options) putBuffer(b *[]byte) {
	o.buffers.Put(b)
}

// Option configures NewHandler (kas side) or NewUpstream and Register (agent side).
type Option func(*options)

// WithChunkSize sets the largest body chunk sent on the tunnel (both sides). Values below 1 are
// ignored.
func WithChunkSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.chunkSize = n
		}
	}
}

// WithVia sets the pseudonym kas adds to Via headers (kas side).
func WithVia(pseudonym string) Option {
	return func(o *options) {
		if pseudonym != "" {
			o.via = pseudonym
		}
	}
}

// WithHTTPClient sets the client the agent uses to reach the upstream (agent side). It must not follow
// redirects, so that the caller sees them; the default client does not.
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) { o.client = c }
}

// WithLogger sets the logger (both sides). The default discards.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

func newOptions(opts []Option) options {
	o := options{chunkSize: DefaultChunkSize, via: DefaultVia, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	size := o.chunkSize
	o.buffers = &sync.Pool{New: func() any {
		b := make([]byte, size)
		return &b
	}}
	return o
}
