package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

const (
	// RedisStartTimeout bounds how long starting Redis waits for it to answer PING.
	RedisStartTimeout = 10 * time.Second
	// redisPortAttempts is how often StartRedis tries another free port: the port is free when picked,
	// but another process may take it before redis-server binds it.
	redisPortAttempts = 3
)

// Redis is a throw-away redis-server on loopback, without persistence. Kill and Start take it away and
// bring it back empty on the same port, as an outage would. Its methods are safe for concurrent use.
type Redis struct {
	bin, dir string
	ownDir   bool
	port     int

	mu   sync.Mutex
	proc *Proc // nil while not running
}

// StartRedis runs redis-server on a free 127.0.0.1 port, in dir (empty: a new temporary directory that
// Close removes), and waits until it answers PING.
func StartRedis(dir string) (*Redis, error) {
	bin, err := findRedis()
	if err != nil {
		return nil, err
	}
	r := &Redis{bin: bin, dir: dir}
	if dir == "" {
		if r.dir, err = os.MkdirTemp("", "tunnelbench-redis-"); err != nil {
			return nil, err
		}
		r.ownDir = true
	}
	var errs []error
	for range redisPortAttempts {
		if r.port, err = freePort(); err != nil {
			errs = append(errs, err)
			break
		}
		if err = r.Start(); err == nil {
			return r, nil
		}
		errs = append(errs, err)
	}
	_ = r.Close()
	return nil, fmt.Errorf("start redis-server: %w", errors.Join(errs...))
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Start starts the server again, empty, on the same port, and waits until it answers PING. It fails
// when the server runs.
func (r *Redis) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		return errors.New("redis is already running")
	}
	p, err := Start("redis-server", r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--loglevel", "warning")
	if err != nil {
		return err
	}
	if err := p.WaitReady(context.Background(), RedisStartTimeout, func() bool { return ping(r.Addr()) == nil }); err != nil {
		_ = p.Kill()
		return fmt.Errorf("redis-server on %s: %w", r.Addr(), err)
	}
	r.proc = p
	return nil
}

// Kill ends the server at once, as a crash would: clients see their connections reset and new
// connections refused. It fails when the server is not running.
func (r *Redis) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return errors.New("redis is not running")
	}
	p := r.proc
	r.proc = nil
	return p.Kill()
}

// Restart kills the server if it runs and starts an empty one on the same port.
func (r *Redis) Restart() error {
	if r.Running() {
		if err := r.Kill(); err != nil {
			return err
		}
	}
	return r.Start()
}

// Running reports whether the server runs.
func (r *Redis) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil
}

// Close kills the server if it runs and removes the directory StartRedis made.
func (r *Redis) Close() error {
	var err error
	if r.Running() {
		err = r.Kill()
	}
	if r.ownDir {
		err = errors.Join(err, os.RemoveAll(r.dir))
	}
	return err
}

func findRedis() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("redis-server not found in PATH, /usr/bin or /usr/local/bin; install it: apt-get install -y redis-server")
}

// ping sends PING and wants +PONG, so that a server that accepts but does not answer yet is not ready.
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
