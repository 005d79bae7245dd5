// Package testredis runs a real, throw-away redis-server for tests: on a free loopback port, without
// persistence, stopped when the test ends. Stop and Restart let a test take Redis away and bring it back.
// A test that needs Redis is in the full tier (testtier): skipped under -short, and outside -short it
// fails when redis-server is missing. It wraps bench/topology/proc's Redis, failing the test where that
// returns an error.
package testredis

import (
	"testing"

	"github.com/tunnelbench/tunnelbench/bench/topology/proc"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// Server is one redis-server process. Its methods must be called from the test's goroutine, because they
// fail the test on error.
type Server struct {
	t testing.TB
	r *proc.Redis
}

// Start runs redis-server on a free 127.0.0.1 port and waits until it answers PING. The server is stopped
// when the test ends. Under -short it skips the test instead.
func Start(t testing.TB) *Server {
	t.Helper()
	testtier.Full(t, "needs redis-server")
	r, err := proc.StartRedis(t.TempDir())
	if err != nil {
		t.Fatalf("testredis: %v", err)
	}
	s := &Server{t: t, r: r}
	t.Cleanup(s.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.r.Addr() }

// Stop kills the server, as a crash would: clients see their connections reset and new connections
// refused. It does nothing when the server is not running.
func (s *Server) Stop() {
	s.t.Helper()
	if !s.r.Running() {
		return
	}
	if err := s.r.Kill(); err != nil {
		s.t.Errorf("testredis: %v", err)
	}
}

// Restart stops the server if it runs and starts an empty one on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.r.Restart(); err != nil {
		s.t.Fatalf("testredis: restart redis-server on %s: %v", s.Addr(), err)
	}
}
