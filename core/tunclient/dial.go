package tunclient

import (
	"crypto/tls"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/tunclient/h2conn"
	"github.com/tunnelbench/tunnelbench/core/tunclient/reconnect"
)

// DefaultKeepaliveTime is how long a quiet connection to kas waits before the agent pings it, so that a
// kas that vanished without closing the connection (a black hole) is noticed.
const DefaultKeepaliveTime = 20 * time.Second

// connectBackoff is gRPC's reconnect backoff for the connection to kas, capped like reconnect.DefaultBackoff.
var connectBackoff = backoff.Config{
	BaseDelay:  reconnect.DefaultBackoff.Initial,
	Multiplier: reconnect.DefaultBackoff.Factor,
	Jitter:     reconnect.DefaultBackoff.Jitter,
	MaxDelay:   reconnect.DefaultBackoff.Max,
}

// DialKas returns a plaintext connection to kas's agent API that sends token with every call: for
// loopback development only, as the token crosses the network in the clear. See DialKasTLS.
func DialKas(target, token string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return dialKas(target, token, nil, opts)
}

// DialKasTLS returns a connection to kas's agent API over TLS that sends token with every call; the
// token is never sent without TLS.
func DialKasTLS(target, token string, config *tls.Config, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if config == nil {
		return nil, fmt.Errorf("dial kas %s: no TLS configuration", target)
	}
	return dialKas(target, token, config, opts)
}

func dialKas(target, token string, config *tls.Config, opts []grpc.DialOption) (*grpc.ClientConn, error) {
	if token == "" {
		return nil, fmt.Errorf("dial kas %s: empty agent token", target)
	}
	creds := insecure.NewCredentials()
	if config != nil {
		creds = credentials.NewTLS(config)
	}
	all := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(newBearerCreds(token, config == nil)),
		// gRPC's own reconnect backoff grows to 2 minutes by default: after a long kas outage the
		// connection would stay down long after kas came back, whatever the pool's backoff.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: connectBackoff, MinConnectTimeout: 20 * time.Second}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                DefaultKeepaliveTime,
			Timeout:             10 * time.Second,
			PermitWithoutStream: true,
		}),
		// A tunnel is never retried by gRPC: the pool reconnects, and kas moves a call that a withdrawn
		// tunnel could not take. Retry support would buffer every message for nothing.
		grpc.WithDisableRetry(),
		// Idle agents hold no write buffer.
		grpc.WithSharedWriteBuffer(true),
	}
	all = append(all, grpctool.WindowDialOptions()...)
	all = append(all, opts...)
	conn, err := grpc.NewClient(target, all...)
	if err != nil {
		return nil, fmt.Errorf("dial kas %s: %w", target, err)
	}
	return conn, nil
}

// KasConn is an agent's connection to kas: gRPC-go's (DialKas, DialKasTLS) or h2conn's (DialKasHTTP2).
type KasConn interface {
	grpc.ClientConnInterface
	Close() error
}

// DialKasHTTP2 returns a connection to kas's agent API on h2conn, which sends token with every call:
// an idle agent costs about a fifth less memory than with gRPC-go's ClientConn (DialKas). Without
// o.TLS the connection is plaintext, for loopback development only. o.Credentials is set here.
func DialKasHTTP2(target, token string, o h2conn.Options) (*h2conn.Conn, error) {
	if token == "" {
		return nil, fmt.Errorf("dial kas %s: empty agent token", target)
	}
	o.Credentials = newBearerCreds(token, o.TLS == nil)
	if o.KeepaliveTime == 0 {
		o.KeepaliveTime = DefaultKeepaliveTime
	}
	o.StreamWindow, o.ConnectionWindow = grpctool.StreamWindow, grpctool.ConnectionWindow
	conn, err := h2conn.New(target, o)
	if err != nil {
		return nil, fmt.Errorf("dial kas %s: %w", target, err)
	}
	return conn, nil
}
