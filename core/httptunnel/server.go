package httptunnel

import (
	"net/http"
)

// NewServer returns an HTTP server for handler on addr (DefaultListen when empty) that speaks HTTP/1.1
// and HTTP/2 without TLS (h2c, prior knowledge). Only the request header has a read timeout: bodies and
// responses may stream for as long as they need. Run it with ListenAndServe or Serve; stop it with
// Shutdown, which waits for exchanges in flight.
func NewServer(handler http.Handler, addr string) *http.Server {
	if addr == "" {
		addr = DefaultListen
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           handler,
		Protocols:         &protocols,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
	}
}
