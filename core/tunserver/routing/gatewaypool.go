package routing

import (
	"fmt"
	"net/url"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
)

// ParsePrivateURL checks a kas private API URL ("grpc://host:port", or "grpcs://host:port" with TLS) and
// returns the dial target and whether it needs TLS.
func ParsePrivateURL(s string) (target string, tls bool, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", false, fmt.Errorf("private URL %q: %w", s, err)
	}
	switch u.Scheme {
	case "grpc":
	case "grpcs":
		tls = true
	default:
		return "", false, fmt.Errorf("private URL %q: scheme must be grpc or grpcs", s)
	}
	if u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", false, fmt.Errorf("private URL %q: want grpc://host:port", s)
	}
	return u.Host, tls, nil
}

// GatewayPool keeps one connection per gateway kas, made on first use.
type GatewayPool struct {
	opts []grpc.DialOption
	// tls dials grpcs:// gateways; nil refuses them.
	tls credentials.TransportCredentials

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// NewGatewayPool dials kas private APIs with auth and opts (message sizes, ...). With tlsCreds it dials
// grpcs:// URLs only; without, grpc:// URLs only.
func NewGatewayPool(pauth *auth.PrivateAuth, tlsCreds credentials.TransportCredentials, opts ...grpc.DialOption) *GatewayPool {
	all := []grpc.DialOption{
		grpc.WithPerRPCCredentials(pauth.Credentials()),
		grpc.WithDisableRetry(), // the finder tries other gateways itself
	}
	all = append(all, grpctool.WindowDialOptions()...)
	return &GatewayPool{opts: append(all, opts...), tls: tlsCreds, conns: map[string]*grpc.ClientConn{}}
}

// Conn returns the connection to the kas at privateURL.
func (p *GatewayPool) Conn(privateURL string) (grpc.ClientConnInterface, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("gateway pool closed")
	}
	if c, ok := p.conns[privateURL]; ok {
		return c, nil
	}
	target, tls, err := ParsePrivateURL(privateURL)
	if err != nil {
		return nil, err
	}
	opts := p.opts
	switch {
	case !tls && p.tls != nil:
		// A kas with TLS talks to peers over TLS only: a plaintext URL planted in the tracker must not
		// receive calls or private API tokens.
		return nil, fmt.Errorf("gateway %s: this kas runs TLS and refuses plaintext peers; use grpcs://", privateURL)
	case !tls:
		opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	case p.tls != nil:
		opts = append([]grpc.DialOption{grpc.WithTransportCredentials(p.tls)}, opts...)
	default:
		return nil, fmt.Errorf("gateway %s: grpcs:// needs TLS on this kas", privateURL)
	}
	c, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial gateway %s: %w", privateURL, err)
	}
	p.conns[privateURL] = c
	return c, nil
}

// Close closes every connection.
func (p *GatewayPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
