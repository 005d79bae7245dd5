// Package httpproxy is the HTTP counterpart of bench/grpcproxy: a chain of plain reverse proxies
// (net/http/httputil) on loopback in front of an HTTP server, so that a run shows beside the HTTP
// tunnel what its hops cost by themselves. A request through kas's HTTP listener crosses three
// connections each way (client → kas → agent → upstream); a chain of two proxies crosses as many
// (client → proxy → proxy → upstream), with nothing of a tunnel: no routing, no gRPC, no framing.
//
// The proxies forward; they do not check, limit or count. Each has a transport of its own, tuned as
// the agent's upstream transport is (kept-alive connections, no compression, no proxy from the
// environment).
package httpproxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Hops is how many proxies Start chains: as many connections as a request through kas crosses.
const Hops = 2

// Chain is Hops reverse proxies in a row, serving on loopback. Close it when done.
type Chain struct {
	// URL is the first proxy's base URL: a request for URL + path reaches the upstream's path.
	URL     string
	servers []*http.Server
	trs     []*http.Transport
}

// Start chains Hops proxies in front of upstream, an http URL.
func Start(upstream string) (*Chain, error) {
	next, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("http proxy: upstream %q: %w", upstream, err)
	}
	if next.Scheme != "http" || next.Host == "" {
		return nil, fmt.Errorf("http proxy: upstream %q: want an http URL with a host", upstream)
	}
	c := &Chain{}
	// The last proxy first: each forwards to the one started before it.
	for range Hops {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("http proxy: %w", err)
		}
		target := next
		tr := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        64,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		}
		rp := &httputil.ReverseProxy{
			// X-Forwarded-For and the rest, as kas adds Via: a proxy's usual header work.
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				r.Out.Header["X-Forwarded-For"] = r.In.Header["X-Forwarded-For"] // appended to, not replaced
				r.SetXForwarded()
			},
			Transport: tr,
		}
		srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		c.servers = append(c.servers, srv)
		c.trs = append(c.trs, tr)
		next = &url.URL{Scheme: "http", Host: l.Addr().String()}
	}
	c.URL = next.String()
	return c, nil
}

// Close stops the proxies and closes their idle upstream connections.
func (c *Chain) Close() error {
	var errs []error
	for _, s := range c.servers {
		errs = append(errs, s.Close())
	}
	for _, tr := range c.trs {
		tr.CloseIdleConnections()
	}
	return errors.Join(errs...)
}
