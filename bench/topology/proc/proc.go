// Package proc runs the harness's child processes (kas, agentk, the demo server, redis-server) the way a
// user runs them: real flags, real ports, SIGTERM to stop, output kept in memory for error messages.
// It is the leaf of the topology layer and must never import the tunnel core: core's own tests use it.
package proc

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process defaults.
const (
	// MaxOutput is how much of a process's output is kept: the start, where start-up errors are.
	MaxOutput = 1 << 20
	// DefaultStartTimeout bounds how long a process may take to become ready (WaitReady).
	DefaultStartTimeout = 30 * time.Second
	// KillTimeout bounds the wait for a killed process to be reaped.
	KillTimeout = 10 * time.Second
	// readyInterval is how often WaitReady checks its condition.
	readyInterval = 20 * time.Millisecond
	// pipeDelay bounds how long a process's output is still read after it exited: a child it left
	// behind may hold the pipes open.
	pipeDelay = time.Second
)

// Proc is a running child process. Its stdout and stderr are kept together (Output) and stdout alone
// (Stdout), each up to MaxOutput bytes.
type Proc struct {
	name        string
	cmd         *exec.Cmd
	out, stdout *lockedBuffer
	done        chan struct{}
	err         error // the exit error, set before done closes
}

// Start runs bin with args; name says which process it is in errors ("kas 0").
func Start(name, bin string, args ...string) (*Proc, error) {
	return StartCmd(name, exec.Command(bin, args...))
}

// StartCmd runs cmd, which must not have its Stdout or Stderr set: Proc keeps them.
func StartCmd(name string, cmd *exec.Cmd) (*Proc, error) {
	if cmd.Stdout != nil || cmd.Stderr != nil {
		return nil, fmt.Errorf("start %s: its output is already taken", name)
	}
	p := &Proc{name: name, cmd: cmd, out: &lockedBuffer{}, stdout: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(p.out, p.stdout), p.out
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = pipeDelay
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// Wait returns once the output is copied, so no copying goroutine outlives done.
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Name is the name the process was started with.
func (p *Proc) Name() string { return p.name }

// Output is what the process wrote so far, stdout and stderr interleaved.
func (p *Proc) Output() string { return p.out.String() }

// Stdout is what the process wrote to stdout so far.
func (p *Proc) Stdout() string { return p.stdout.String() }

// Done is closed when the process has ended and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited is nil while the process runs, and otherwise an error with the end of its output.
func (p *Proc) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v): %s", p.name, p.err, LastLines(p.Output(), 5))
	default:
		return nil
	}
}

// WaitReady checks cond until it holds, and fails when the process exits, ctx ends or timeout passes
// first (a timeout <= 0 means DefaultStartTimeout).
func (p *Proc) WaitReady(ctx context.Context, timeout time.Duration, cond func() bool) error {
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(readyInterval)
	defer tick.Stop()
	for !cond() {
		if err := p.Exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w; its output: %s", p.name, timeout, ctx.Err(), LastLines(p.Output(), 5))
		case <-tick.C:
		}
	}
	return nil
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop asks the process to stop (SIGTERM) and kills it after grace. It returns the process's exit
// error, or why it did not stop in time.
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		if err := p.Kill(); err != nil {
			return err
		}
		return fmt.Errorf("%s did not stop within %s after SIGTERM", p.name, grace)
	}
}

// Kill ends the process at once, as a crash would, and waits (up to KillTimeout) until it is reaped.
func (p *Proc) Kill() error {
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(KillTimeout):
		return fmt.Errorf("%s (pid %d) did not exit within %s of SIGKILL", p.name, p.cmd.Process.Pid, KillTimeout)
	}
}

// LastLines is the last n lines of s, joined with "; ", for one-line error messages.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// FreeAddr returns a loopback address with a port that was free a moment ago: for a process that
// takes its listen addresses as flags.
func FreeAddr() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// lockedBuffer keeps the first MaxOutput bytes written to it, from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := MaxOutput - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
