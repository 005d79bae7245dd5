// Package testredis runs a real, throw-away redis-server for tests: on a free loopback port, without
// persistence, stopped when the test ends. Stop and Restart let a test take Redis away and bring it back.
// It never skips: a test that needs Redis fails when redis-server is missing.
package testredis

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// startTimeout bounds how long Start and Restart wait for the server to answer PING.
	startTimeout = 10 * time.Second
	// stopTimeout bounds how long Stop waits for the killed process to be reaped.
	stopTimeout = 10 * time.Second
	// portAttempts is how often Start tries another free port: the port is free when picked but another
	// process may take it before redis-server binds it.
	portAttempts = 3
)

// Server is one redis-server process. Its methods must be called from the test's goroutine, because they
// fail the test on error.
type Server struct {
	t       testing.TB
	binary  string
	dir     string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been reaped
	logPath string
}

// Start runs redis-server on a free 127.0.0.1 port and waits until it answers PING. The server is stopped
// when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	binary, err := findBinary()
	if err != nil {
		t.Fatalf("testredis: %v; install redis-server: apt-get install -y redis-server", err)
	}
	s := &Server{t: t, binary: binary, dir: t.TempDir()}
	t.Cleanup(s.Stop)
	var errs []error
	for range portAttempts {
		port, err := freePort()
		if err != nil {
			t.Fatalf("testredis: pick a free port: %v", err)
		}
		s.port = port
		if err = s.start(); err == nil {
			return s
		}
		errs = append(errs, err)
	}
	t.Fatalf("testredis: start redis-server: %v", errors.Join(errs...))
	return nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Stop kills the server, as a crash would: clients see their connections reset and new connections
// refused. It does nothing when the server is not running.
func (s *Server) Stop() {
	s.t.Helper()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.t.Errorf("testredis: redis-server (pid %d) did not exit within %v of SIGKILL", s.cmd.Process.Pid, stopTimeout)
	}
	s.cmd = nil
}

// Restart stops the server if it runs and starts an empty one on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("testredis: restart redis-server on %s: %v", s.Addr(), err)
	}
}

func findBinary() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("redis-server not found in PATH, /usr/bin or /usr/local/bin")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the process and waits for PING; on failure the process is gone and the error carries its
// log.
func (s *Server) start() error {
	s.logPath = filepath.Join(s.dir, "redis-"+strconv.Itoa(s.port)+".log")
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(s.binary,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--loglevel", "warning",
	)
	// An *os.File, not a buffer, so that no copying goroutine outlives the test.
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("redis-server exited early on port %d: %s", s.port, s.log())
		default:
		}
		if err := ping(s.Addr()); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("redis-server on port %d did not answer PING within %v (%v): %s", s.port, startTimeout, err, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(b))
}

func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}
