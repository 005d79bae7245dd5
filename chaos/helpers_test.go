package chaos

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// waitLimit bounds every wait in these tests that is expected to end.
const waitLimit = 5 * time.Second

// startEcho starts a TCP echo server on loopback; the test's cleanup stops it and its connections.
func startEcho(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					_ = c.Close()
				}()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// proxyTo starts proxies with one agent->kas proxy named "agent-1" in front of upstream.
func proxyTo(t *testing.T, upstream string) (*Proxies, *Proxy) {
	t.Helper()
	ps := NewProxies()
	t.Cleanup(ps.Close)
	if _, err := ps.Add(LinkAgentKas, AgentName(1), upstream); err != nil {
		t.Fatal(err)
	}
	return ps, ps.Get(LinkAgentKas, AgentName(1))
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads it back, bounded by waitLimit; it returns how long that took.
func roundTrip(t *testing.T, c net.Conn, msg []byte) time.Duration {
	t.Helper()
	start := time.Now()
	if err := c.SetDeadline(start.Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		errc <- err
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("round trip of %d bytes: %v", len(msg), err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write %d bytes: %v", len(msg), err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echo differs from what was sent")
	}
	return time.Since(start)
}

// expectSilence writes msg and checks that nothing comes back within d.
func expectSilence(t *testing.T, c net.Conn, msg []byte, d time.Duration) {
	t.Helper()
	if _, err := c.Write(msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(d))
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read %d bytes, %v; want nothing until the deadline", n, err)
	}
}

// readEnd reads until the connection ends (bounded by waitLimit) and returns the error that ended
// it (io.EOF for an orderly close) and how long it took.
func readEnd(t *testing.T, c net.Conn) (error, time.Duration) {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(waitLimit))
	_, err := io.Copy(io.Discard, c)
	if err == nil {
		err = io.EOF
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection did not end within %s", waitLimit)
	}
	return err, time.Since(start)
}

func newFault(t *testing.T, typ string, params Params) Fault {
	t.Helper()
	f, err := NewFault(typ, params)
	if err != nil {
		t.Fatalf("NewFault(%s, %v): %v", typ, params, err)
	}
	return f
}

func applyFault(t *testing.T, f Fault, ps ...*Proxy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := Apply(ctx, f, ps); err != nil {
		t.Fatal(err)
	}
}

func removeFault(t *testing.T, f Fault, ps ...*Proxy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := Remove(ctx, f, ps); err != nil {
		t.Fatal(err)
	}
}
