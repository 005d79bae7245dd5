package chaos

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

var ping = []byte("ping")

func TestLatency(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want time.Duration // lower bound of a round trip: 100ms ± 10ms per delayed direction
	}{{"both", 180 * time.Millisecond}, {"upstream", 90 * time.Millisecond}, {"downstream", 90 * time.Millisecond}} {
		t.Run(tc.dir, func(t *testing.T) {
			_, p := proxyTo(t, startEcho(t))
			c := dial(t, p.Listen())
			roundTrip(t, c, ping)
			f := newFault(t, "latency", Params{"latency": "100ms", "jitter": "10ms", "direction": tc.dir})
			applyFault(t, f, p) // on a connection that already exists
			for range 3 {
				if d := roundTrip(t, c, ping); d < tc.want {
					t.Errorf("round trip took %s with latency 100ms ± 10ms %s; want at least %s", d, tc.dir, tc.want)
				}
			}
			removeFault(t, f, p)
			if d := roundTrip(t, c, ping); d >= 90*time.Millisecond {
				t.Errorf("round trip took %s after the latency was removed", d)
			}
		})
	}
}

// A fault on some proxies of a link leaves the others alone.
func TestPartialFault(t *testing.T) {
	echo := startEcho(t)
	ps := NewProxies()
	t.Cleanup(ps.Close)
	for id := int64(1); id <= 4; id++ {
		if _, err := ps.Add(LinkAgentKas, AgentName(id), echo); err != nil {
			t.Fatal(err)
		}
	}
	slow, err := ps.Select(LinkAgentKas, Select{Fraction: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if len(slow) != 2 || slow[0].Name() != "agent-1" || slow[1].Name() != "agent-2" {
		t.Fatalf("fraction 0.5 of 4 agents picked %v", slow)
	}
	f := newFault(t, "latency", Params{"latency": "100ms"})
	applyFault(t, f, slow...)
	for _, p := range ps.Instances(LinkAgentKas) {
		d := roundTrip(t, dial(t, p.Listen()), ping)
		if affected := p.Name() <= "agent-2"; affected != (d >= 190*time.Millisecond) {
			t.Errorf("%s: round trip %s (affected: %v)", p, d, affected)
		}
	}
	removeFault(t, f, slow...)
}

func TestBandwidth(t *testing.T) {
	_, p := proxyTo(t, startEcho(t))
	msg := make([]byte, 100_000)
	f := newFault(t, "bandwidth", Params{"rate": "100KB/s"})
	applyFault(t, f, p)
	if d := roundTrip(t, dial(t, p.Listen()), msg); d < 800*time.Millisecond {
		t.Errorf("100 kB at 100KB/s each way took %s; want at least 800ms", d)
	}
	removeFault(t, f, p)
	if d := roundTrip(t, dial(t, p.Listen()), msg); d > 500*time.Millisecond {
		t.Errorf("100 kB without a bandwidth limit took %s", d)
	}
}

func TestSlowClose(t *testing.T) {
	_, p := proxyTo(t, startEcho(t))
	closeAndWait := func() time.Duration {
		c := dial(t, p.Listen())
		roundTrip(t, c, ping)
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		err, d := readEnd(t, c)
		if err != io.EOF {
			t.Fatalf("connection ended with %v; want EOF", err)
		}
		return d
	}
	f := newFault(t, "slow-close", Params{"delay": "200ms"})
	applyFault(t, f, p)
	// The client's close reaches the echo server 200ms late, and the server's close comes back 200ms late.
	if d := closeAndWait(); d < 380*time.Millisecond {
		t.Errorf("close took %s with slow-close 200ms both ways; want at least 380ms", d)
	}
	removeFault(t, f, p)
	if d := closeAndWait(); d > 150*time.Millisecond {
		t.Errorf("close took %s without slow-close", d)
	}
}

func TestBlackhole(t *testing.T) {
	_, p := proxyTo(t, startEcho(t))
	before := dial(t, p.Listen())
	roundTrip(t, before, ping)
	f := newFault(t, "blackhole", nil)
	applyFault(t, f, p)
	expectSilence(t, before, ping, 300*time.Millisecond)
	during := dial(t, p.Listen()) // the proxy still accepts
	expectSilence(t, during, ping, 300*time.Millisecond)
	removeFault(t, f, p)
	// Removing the black hole closes the connections it held.
	for _, c := range []net.Conn{before, during} {
		if err, _ := readEnd(t, c); err == nil {
			t.Fatal("unreachable")
		}
	}
	roundTrip(t, dial(t, p.Listen()), ping)
}

func TestBlackholeCloseAfter(t *testing.T) {
	_, p := proxyTo(t, startEcho(t))
	f := newFault(t, "blackhole", Params{"close_after": "200ms", "direction": "upstream"})
	applyFault(t, f, p)
	c := dial(t, p.Listen())
	expectSilence(t, c, ping, 100*time.Millisecond)
	if err, d := readEnd(t, c); err != io.EOF || d > 2*time.Second {
		t.Errorf("black hole with close_after 200ms: connection ended with %v after %s", err, d)
	}
	removeFault(t, f, p)
	roundTrip(t, dial(t, p.Listen()), ping)
}

func TestResetPeer(t *testing.T) {
	_, p := proxyTo(t, startEcho(t))
	before := dial(t, p.Listen())
	roundTrip(t, before, ping)
	f := newFault(t, "reset-peer", nil)
	applyFault(t, f, p)

	after := dial(t, p.Listen())
	if _, err := after.Write(ping); err != nil {
		t.Fatal(err)
	}
	if err, _ := readEnd(t, after); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a connection made after reset-peer ended with %v; want connection reset", err)
	}
	// A connection that existed before is closed, but without a reset (toxiproxy sets SO_LINGER 0
	// only when a connection starts).
	if _, err := before.Write(ping); err != nil {
		t.Fatal(err)
	}
	if err, _ := readEnd(t, before); err != io.EOF {
		t.Errorf("a connection made before reset-peer ended with %v; want EOF", err)
	}
	removeFault(t, f, p)
	roundTrip(t, dial(t, p.Listen()), ping)
}

func TestLimitData(t *testing.T) {
	_, p := proxyTo(t, startEcho(t))
	f := newFault(t, "limit-data", Params{"bytes": "64", "direction": "downstream"})
	applyFault(t, f, p)
	c := dial(t, p.Listen())
	half := []byte(strings.Repeat("x", 32))
	roundTrip(t, c, half)
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("after 32 of 64 bytes the connection should stay open; read: %v", err)
	}
	roundTrip(t, c, half)
	if err, _ := readEnd(t, c); err != io.EOF {
		t.Errorf("after 64 bytes the connection ended with %v; want EOF", err)
	}
	removeFault(t, f, p)
	roundTrip(t, dial(t, p.Listen()), make([]byte, 1000))
}

func TestLinkDown(t *testing.T) {
	_, p := proxyTo(t, startEcho(t))
	before := dial(t, p.Listen())
	roundTrip(t, before, ping)
	f := newFault(t, "link-down", nil)
	applyFault(t, f, p)
	if err, _ := readEnd(t, before); err == nil {
		t.Fatal("unreachable")
	}
	if c, err := net.DialTimeout("tcp", p.Listen(), waitLimit); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("dial a link that is down: %v; want connection refused", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := Apply(ctx, f, []*Proxy{p}); err == nil || !strings.Contains(err.Error(), "apply link-down to agent->kas/agent-1: the link is already down") {
		t.Errorf("link-down twice: %v", err)
	}
	removeFault(t, f, p)
	roundTrip(t, dial(t, p.Listen()), ping)
	if err := Remove(ctx, f, []*Proxy{p}); err == nil || !strings.Contains(err.Error(), "the link is not down") {
		t.Errorf("link-up twice: %v", err)
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	echo := startEcho(t)
	ps := NewProxies()
	t.Cleanup(ps.Close)
	for _, n := range []string{"kas-0", "kas-1"} {
		if _, err := ps.Add(LinkCallerKas, n, echo); err != nil {
			t.Fatal(err)
		}
	}
	all := ps.Instances(LinkCallerKas)
	f := newFault(t, "latency", Params{"latency": "50ms"})
	applyFault(t, f, all[1])
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := Apply(ctx, f, all)
	if err == nil || !strings.Contains(err.Error(), "apply latency to caller->kas/kas-1: add toxic latency upstream: toxic already exists") {
		t.Fatalf("applying a fault twice: %v", err)
	}
	if n := len(all[0].p.Toxics.GetToxicArray()); n != 0 {
		t.Errorf("kas-0 kept %d toxics after a failed apply", n)
	}
	removeFault(t, f, all[1])
	if err := Remove(ctx, f, all[1:]); err == nil || !strings.Contains(err.Error(), "remove latency from caller->kas/kas-1: remove toxic latency upstream: toxic not found") {
		t.Errorf("removing a fault twice: %v", err)
	}
}

func TestChangeDeadline(t *testing.T) {
	_, p := proxyTo(t, startEcho(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Apply(ctx, newFault(t, "latency", Params{"latency": "10ms"}), []*Proxy{p})
	if err == nil || !strings.Contains(err.Error(), "apply latency to agent->kas/agent-1: not started: context canceled") {
		t.Errorf("apply with an ended context: %v", err)
	}
	if n := len(p.p.Toxics.GetToxicArray()); n != 0 {
		t.Errorf("%d toxics left", n)
	}
	// A change that does not finish in time returns with the reason.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = bounded(ctx, func() error { time.Sleep(200 * time.Millisecond); return nil })
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded (toxiproxy is still busy") {
		t.Errorf("slow change: %v", err)
	}
}

func TestProxies(t *testing.T) {
	echo := startEcho(t)
	ps := NewProxies()
	for _, tc := range []struct {
		link       Link
		name, up   string
		wantErr    string
		wantListen bool
	}{
		{LinkAgentKas, "agent-1/kas-0", echo, "", true},
		{LinkAgentKas, "agent-1/kas-0", echo, "add proxy agent->kas/agent-1/kas-0: already exists", false},
		{"kas->nowhere", "kas-0", echo, `add proxy "kas-0": unknown link "kas->nowhere"`, false},
		{LinkKasRedis, "", echo, "a name and an upstream are required", false},
	} {
		addr, err := ps.Add(tc.link, tc.name, tc.up)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Add(%s, %s): %v; want %q", tc.link, tc.name, err, tc.wantErr)
		}
		if tc.wantListen && !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf("listen address %q", addr)
		}
	}
	ps.Close()
	ps.Close()
	if _, err := ps.Add(LinkAgentKas, "agent-2", echo); err == nil || !strings.Contains(err.Error(), "proxies are closed") {
		t.Errorf("Add after Close: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// limit-data closes a busy connection too: a client that keeps writing sees its connection end
// after about the limit. (This is the case where toxiproxy leaves goroutines behind; see TestMain.)
func TestLimitDataBusyConnection(t *testing.T) {
	_, p := proxyTo(t, startEcho(t))
	f := newFault(t, "limit-data", Params{"bytes": "64KiB", "direction": "upstream"})
	applyFault(t, f, p)
	c := dial(t, p.Listen())
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	go func() { _, _ = io.Copy(io.Discard, c) }()
	sent, chunk := 0, make([]byte, 4<<10)
	for {
		n, err := c.Write(chunk)
		sent += n
		if err != nil {
			if isTimeout(err) {
				t.Fatalf("the connection was still open after %d bytes", sent)
			}
			break
		}
	}
	// The client's socket buffers hold some of what it wrote after the limit.
	if sent < 64<<10 || sent > 64<<10+8<<20 {
		t.Errorf("the connection ended after %d bytes were written; want about 64KiB", sent)
	}
	removeFault(t, f, p)
	roundTrip(t, dial(t, p.Listen()), ping)
}
