package testredis_test

import (
	"net"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/internal/testredis"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func pingOK(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := conn.Read(buf)
	return string(buf[:n]) == "+PONG\r\n"
}

func TestStartStopRestart(t *testing.T) {
	s := testredis.Start(t)
	addr := s.Addr()
	if !pingOK(addr) {
		t.Fatalf("no PONG from %s after Start", addr)
	}
	s.Stop()
	if pingOK(addr) {
		t.Fatalf("PONG from %s after Stop", addr)
	}
	s.Stop() // idempotent
	s.Restart()
	if s.Addr() != addr {
		t.Fatalf("Restart moved the server from %s to %s", addr, s.Addr())
	}
	if !pingOK(addr) {
		t.Fatalf("no PONG from %s after Restart", addr)
	}
	s.Restart() // also works on a running server
	if !pingOK(addr) {
		t.Fatalf("no PONG from %s after second Restart", addr)
	}
}

func TestServersAreIndependent(t *testing.T) {
	a, b := testredis.Start(t), testredis.Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers share %s", a.Addr())
	}
	a.Stop()
	if !pingOK(b.Addr()) {
		t.Fatalf("stopping %s also stopped %s", a.Addr(), b.Addr())
	}
}
