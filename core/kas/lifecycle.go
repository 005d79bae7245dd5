package kas

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/core/grpctool/pingack"
	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// Start opens the listeners and serves. It returns once every listener accepts connections.
func (s *Server) Start() error {
	var err error
	// The error names the flag of the address (the Config field of the same name), which is what a
	// user changes when a port is taken.
	listen := func(l net.Listener, addr, flagName string) net.Listener {
		if err != nil || l != nil || addr == "" {
			return l
		}
		var nl net.Listener
		nl, err = cli.Listen(flagName, addr)
		return nl
	}
	s.listeners.agent = listen(s.cfg.AgentListener, s.cfg.AgentListen, "agent-listen")
	s.listeners.api = listen(s.cfg.APIListener, s.cfg.APIListen, "api-listen")
	s.listeners.private = listen(s.cfg.PrivateListener, s.cfg.PrivateListen, "private-listen")
	s.listeners.metrics = listen(s.cfg.MetricsListener, s.cfg.MetricsListen, "metrics-listen")
	s.listeners.http = listen(s.cfg.HTTPListener, s.cfg.HTTPListen, "http-listen")
	if err != nil {
		s.closeListeners()
		return err
	}
	s.limitConnections()
	serve := func(srv *grpc.Server, l net.Listener) {
		if l == nil {
			return
		}
		s.serveWG.Add(1)
		go func() {
			defer s.serveWG.Done()
			_ = srv.Serve(l) // returns when the server stops
		}()
	}
	serve(s.agentServer, s.listeners.agent)
	api := s.listeners.api
	if api != nil && s.certs == nil {
		// Callers' gRPC clients probe the bandwidth with a PING on nearly every call's answer; kas answers
		// the call 100 µs or more later, so the ACK would leave alone and wake the caller twice per call.
		// Over TLS the public credentials do this (newAPIServer).
		api = pingack.Listener(api, &s.pingAcks)
	}
	serve(s.apiServer, api)
	serve(s.privateServer, s.listeners.private)
	s.serveHTTPTunnel()
	s.serveMetrics()
	if s.dir != nil {
		self := s.cfg.PrivateURL
		if self == "" {
			scheme := "grpc://"
			if s.certs != nil {
				scheme = "grpcs://"
			}
			self = scheme + s.listeners.private.Addr().String()
		}
		s.finder.SetSelfURL(self)
		s.dir.Start(self)
	}
	s.ready.Store(true)
	s.cfg.Log.Info("kas started", "agent_api", addrOf(s.listeners.agent), "public_api", addrOf(s.listeners.api),
		"private_api", addrOf(s.listeners.private), "http", addrOf(s.listeners.http), "metrics", addrOf(s.listeners.metrics),
		"tls", s.certs != nil, "caller_auth", s.cfg.Callers != nil)
	if s.certs == nil {
		s.cfg.Log.Warn("listeners are plaintext: tokens cross the network in the clear; use --tls-cert-file and --tls-key-file beyond loopback")
	}
	if s.cfg.Callers == nil {
		s.cfg.Log.Warn("dev mode: the public API and the HTTP listener accept any caller (loopback only)")
	}
	return nil
}

// limitConnections caps the HTTP and metrics listeners at MaxConnections open connections:
// connections cost kas goroutines and buffers before any token is checked, so an anonymous client must
// not open them without bound. Past the cap, new connections wait in the kernel's accept queue.
//
// The gRPC listeners are bounded in time instead: a connection must finish its handshake within
// connectionHandshakeTimeout and is closed after IdleConnectionTimeout without a stream. Counting them
// would mean wrapping their connections, and gRPC only waits for data without holding a 32 KiB read
// buffer on a bare *net.TCPConn: every idle agent connection would cost that much more.
func (s *Server) limitConnections() {
	n := s.cfg.Limits.MaxConnections
	for _, l := range []*net.Listener{&s.listeners.metrics, &s.listeners.http} {
		if *l != nil {
			*l = limits.NewListener(*l, n)
		}
	}
}

func (s *Server) closeListeners() {
	for _, l := range []net.Listener{s.listeners.agent, s.listeners.api, s.listeners.private, s.listeners.metrics, s.listeners.http} {
		if l != nil {
			_ = l.Close()
		}
	}
}

func addrOf(l net.Listener) string {
	if l == nil {
		return "off"
	}
	return l.Addr().String()
}

// Shutdown stops kas gracefully: readiness fails, waiting calls get Unavailable "kas is shutting down",
// idle tunnels end so their agents reconnect elsewhere (with jitter), and calls in flight get up to
// ShutdownGrace to finish before they are cut. ctx can shorten the grace. It returns when every server
// goroutine ended.
func (s *Server) Shutdown(ctx context.Context) {
	s.shutOnce.Do(func() {
		s.ready.Store(false)
		if s.dir != nil {
			s.dir.Stop(ctx) // unregisters this kas's agents, within ctx
		}
		s.registry.Stop()
		if s.gateway != nil {
			s.gateway.Drain() // hop streams end between calls, so that they do not hold the graceful stop
		}
		s.drain(ctx)
		s.release()
	})
}

// Kill stops kas abruptly, as a crash would: every connection drops at once, no agent is told to
// reconnect elsewhere, calls in flight fail, and the tracker keeps this kas's records until they
// expire. The harness uses it to inject process faults.
func (s *Server) Kill() {
	s.shutOnce.Do(func() {
		s.ready.Store(false)
		// Connections go first, at once, before the registry or the tracker learn anything: no tunnel
		// gets a clean end, and no call starts on a kas that is dying.
		for _, srv := range []*grpc.Server{s.apiServer, s.agentServer, s.privateServer} {
			srv.Stop()
		}
		if s.httpTunnel != nil {
			_ = s.httpTunnel.Close()
		}
		if s.dir != nil {
			s.dir.Kill() // the records stay, as after a crash
		}
		s.registry.Stop()
		s.drain(context.Background())
		s.release()
	})
}

// drain stops every server, letting calls in flight finish within ShutdownGrace (or ctx), then cuts
// them. It returns when every serving goroutine ended.
func (s *Server) drain(ctx context.Context) {
	graceCtx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownGrace)
	defer cancel()
	var wg sync.WaitGroup
	if s.httpTunnel != nil {
		wg.Go(func() {
			// Requests in flight finish within the grace; then their connections are cut.
			if err := s.httpTunnel.Shutdown(graceCtx); err != nil {
				_ = s.httpTunnel.Close()
			}
		})
	}
	for _, srv := range []*grpc.Server{s.apiServer, s.agentServer, s.privateServer} {
		wg.Go(func() { stopGracefully(graceCtx, srv) })
	}
	wg.Wait()
	if s.httpServer != nil {
		_ = s.httpServer.Shutdown(graceCtx)
		_ = s.httpServer.Close()
	}
	s.serveWG.Wait()
}

// stopGracefully lets srv's calls finish until ctx ends, then stops it.
func stopGracefully(ctx context.Context, srv *grpc.Server) {
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		srv.Stop()
		<-stopped
	}
}

// release closes what the servers used, once they stopped.
func (s *Server) release() {
	if s.dir != nil {
		s.dir.Close()
	}
	if s.finder != nil {
		s.finder.Close()
	}
	if s.gateways != nil {
		s.gateways.Close()
	}
	if s.ownedTracker != nil {
		_ = s.ownedTracker.Close()
	}
	// In-process calls end with the tunnels they use: the registry stopped and the agent server ended
	// every stream. Bound the wait anyway, so that shutdown never hangs on a handler.
	internalDone := make(chan struct{})
	go func() {
		s.internalConn.Wait()
		close(internalDone)
	}()
	select {
	case <-internalDone:
	case <-time.After(5 * time.Second):
		s.cfg.Log.Error("in-process calls still running 5s after shutdown")
	}
	if s.ownsMP {
		_ = s.metrics.Shutdown(context.Background())
	}
	s.cfg.Log.Info("kas stopped")
}
