package kas

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
)

// serveMetrics serves /metrics, /healthz and /readyz on the metrics listener, if it is on.
func (s *Server) serveMetrics() {
	if s.listeners.metrics == nil {
		return
	}
	s.httpServer = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelDebug)}
	l := s.listeners.metrics
	if s.certs != nil && s.cfg.TLS.Metrics {
		l = tls.NewListener(l, tlsfiles.Server(s.certs, nil))
	}
	s.serveWG.Add(1)
	go func() {
		defer s.serveWG.Done()
		_ = s.httpServer.Serve(l)
	}()
}

// httpHandler serves the metrics listener's endpoints.
func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}
