package kas

import (
	"crypto/tls"
	"log/slog"

	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/core/tunserver/refusal"
)

// serveHTTPTunnel serves HTTP for agents on the HTTP listener, if it is on: /agents/{id}/{path} goes
// through kas's in-process connection, so through the same limits and metrics as the public API.
func (s *Server) serveHTTPTunnel() {
	if s.listeners.http == nil {
		return
	}
	guard := &limits.HTTPGuard{
		Next:      httptunnel.NewHandler(s.internalConn, httptunnel.WithLogger(s.cfg.Log)),
		Callers:   s.cfg.Callers,
		MaxBody:   s.cfg.Limits.MaxHTTPBody,
		MaxHeader: s.cfg.Limits.MaxHTTPHeaderBytes,
		OnLimit:   s.rejections.Hit,
		Refusals:  refusal.New(s.cfg.Log.With("listener", "HTTP"), 0),
	}
	s.httpTunnel = httptunnel.NewServer(guard, s.listeners.http.Addr().String())
	s.httpTunnel.ReadHeaderTimeout = s.cfg.Limits.HTTPReadHeaderTimeout
	s.httpTunnel.IdleTimeout = s.cfg.Limits.IdleConnectionTimeout
	// Failed handshakes and malformed requests are the client's problem: debug, in kas's log format.
	s.httpTunnel.ErrorLog = slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelDebug)
	// The guard answers 431 and counts it; the server's own bound, past it, only stops a header too
	// large to read at all.
	s.httpTunnel.MaxHeaderBytes = 2 * s.cfg.Limits.MaxHTTPHeaderBytes
	l := s.listeners.http
	if s.certs != nil {
		s.httpTunnel.TLSConfig = tlsfiles.Server(s.certs, nil)
		s.httpTunnel.TLSConfig.NextProtos = []string{"h2", "http/1.1"}
		l = tls.NewListener(l, s.httpTunnel.TLSConfig)
	}
	s.serveWG.Add(1)
	go func() {
		defer s.serveWG.Done()
		_ = s.httpTunnel.Serve(l)
	}()

}
