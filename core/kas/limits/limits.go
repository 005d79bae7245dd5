// Package limits holds the bounds kas puts on what one agent or caller can make it hold or do: their
// settings with defaults and validation (Limits), the counter every refusal for a limit is reported to
// (tunnel_limit_rejections_total), and the checks kas makes at its own listeners: the cap on open
// connections, the size of routed messages, and the HTTP guard. Limits the tunnel core enforces
// (tunnels and waiting calls per agent, tunnel rate, descriptor and metadata size) stay where they are
// enforced; kas hands them their values from Limits.
//
// It must never route a call, hold a tunnel or know kas's Server: it is handed a listener, a stream or
// the next handler, and only refuses or passes on.
package limits

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tunserver/agentapi"
	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
)

// Limits bound what one agent or caller can make kas hold or do. Zero fields take Default's.
type Limits struct {
	// MaxTunnelsPerAgent bounds one agent's tunnels on this kas, those still in their handshake included.
	MaxTunnelsPerAgent int
	MaxWaitingPerAgent int
	// MaxWaiting bounds the calls waiting for a tunnel on this kas, for any agent.
	MaxWaiting int
	// MaxWaitingPerCaller bounds the calls of one caller token waiting for a tunnel.
	MaxWaitingPerCaller int
	// MaxMetadataBytes bounds a routed call's request metadata (HTTP/2 header list size).
	MaxMetadataBytes int
	// TunnelHandshakeTimeout bounds how long a new tunnel may take to send its descriptor.
	TunnelHandshakeTimeout time.Duration
	// MaxConnections bounds the open connections of the HTTP and metrics listeners each; more wait in
	// the kernel's accept queue until one closes. The gRPC listeners bound connections in time.
	MaxConnections int
	// IdleConnectionTimeout closes a connection that carried no call or tunnel for this long (public,
	// private and agent API, HTTP), so that connections nobody uses do not stay.
	IdleConnectionTimeout time.Duration
	// TunnelRate is the new tunnels per second one agent may open, on average (TunnelBurst at once). A
	// reusable tunnel carries many calls; a single-use agent opens one per call, so for it the rate
	// bounds calls per second too.
	TunnelRate  float64
	TunnelBurst int
	// MaxDescriptorBytes bounds the descriptor an agent sends first on every tunnel.
	MaxDescriptorBytes int
	// MaxHTTPBody bounds an HTTP request body sent through the tunnel (413 above it).
	MaxHTTPBody int64
	// MaxHTTPHeaderBytes bounds an HTTP request's line and header (431 above it).
	MaxHTTPHeaderBytes int
	// HTTPReadHeaderTimeout bounds how long an HTTP client may take to send a request header, so that
	// slow clients (slowloris) cannot hold connections open.
	HTTPReadHeaderTimeout time.Duration
}

// Default limits are generous for real use and still bounded.
var Default = Limits{
	MaxTunnelsPerAgent:     1000,
	MaxWaitingPerAgent:     1000,
	MaxWaiting:             10000,
	MaxWaitingPerCaller:    1000,
	MaxMetadataBytes:       call.DefaultMaxMetadataBytes,
	TunnelHandshakeTimeout: agentapi.DefaultHandshakeTimeout,
	// Above the 10 000 agents of the scale benchmark, each on its own connection.
	MaxConnections:        20000,
	IdleConnectionTimeout: 5 * time.Minute,
	TunnelRate:            20000,
	TunnelBurst:           20000,
	MaxDescriptorBytes:    descriptor.DefaultMaxBytes,
	MaxHTTPBody:           1 << 30,
	MaxHTTPHeaderBytes:    1 << 20,
	// Matches httptunnel's default; a header arrives in one round trip in practice.
	HTTPReadHeaderTimeout: 10 * time.Second,
}

// Validate reports every problem of l in one error, or nil; maxMessageSize is the largest message kas
// routes. It changes nothing: zero values stand for defaults (see WithDefaults).
func (l Limits) Validate(maxMessageSize int) error {
	var errs []error
	if l.MaxTunnelsPerAgent < 0 || l.MaxWaitingPerAgent < 0 || l.TunnelRate < 0 || l.TunnelBurst < 0 || l.MaxHTTPBody < 0 || l.MaxDescriptorBytes < 0 || l.MaxHTTPHeaderBytes < 0 || l.HTTPReadHeaderTimeout < 0 ||
		l.MaxWaiting < 0 || l.MaxWaitingPerCaller < 0 || l.MaxMetadataBytes < 0 || l.TunnelHandshakeTimeout < 0 || l.MaxConnections < 0 || l.IdleConnectionTimeout < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	if l.MaxMetadataBytes > maxMessageSize {
		errs = append(errs, fmt.Errorf("the metadata limit (%d bytes) must not be larger than the message limit (%d bytes): a call's metadata travels to the agent in one tunnel message", l.MaxMetadataBytes, maxMessageSize))
	}
	return errors.Join(errs...)
}

// WithDefaults is a validated l with its zero fields filled from Default. The metadata limit's default
// is kept within maxMessageSize, for the reason Validate gives.
func (l Limits) WithDefaults(maxMessageSize int) Limits {
	d := Default
	if l.TunnelRate == 0 {
		l.TunnelRate, l.TunnelBurst = d.TunnelRate, max(l.TunnelBurst, d.TunnelBurst)
	}
	l.MaxTunnelsPerAgent = cmp.Or(l.MaxTunnelsPerAgent, d.MaxTunnelsPerAgent)
	l.MaxWaitingPerAgent = cmp.Or(l.MaxWaitingPerAgent, d.MaxWaitingPerAgent)
	l.MaxWaiting = cmp.Or(l.MaxWaiting, d.MaxWaiting)
	l.MaxWaitingPerCaller = cmp.Or(l.MaxWaitingPerCaller, d.MaxWaitingPerCaller)
	l.MaxMetadataBytes = cmp.Or(l.MaxMetadataBytes, min(d.MaxMetadataBytes, maxMessageSize))
	l.TunnelHandshakeTimeout = cmp.Or(l.TunnelHandshakeTimeout, d.TunnelHandshakeTimeout)
	l.MaxConnections = cmp.Or(l.MaxConnections, d.MaxConnections)
	l.IdleConnectionTimeout = cmp.Or(l.IdleConnectionTimeout, d.IdleConnectionTimeout)
	l.TunnelBurst = cmp.Or(l.TunnelBurst, d.TunnelBurst)
	l.MaxHTTPBody = cmp.Or(l.MaxHTTPBody, d.MaxHTTPBody)
	l.MaxDescriptorBytes = cmp.Or(l.MaxDescriptorBytes, d.MaxDescriptorBytes)
	l.MaxHTTPHeaderBytes = cmp.Or(l.MaxHTTPHeaderBytes, d.MaxHTTPHeaderBytes)
	l.HTTPReadHeaderTimeout = cmp.Or(l.HTTPReadHeaderTimeout, d.HTTPReadHeaderTimeout)
	return l
}
