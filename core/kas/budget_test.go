package kas_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// The memory budget of SECURITY.md: what one agent token, one caller token and one anonymous client can
// make kas hold with default limits. Each party is driven to its limit and what the whole process then
// holds more than at rest is checked against the budget per item. The test's own client ends are in
// that figure too, so kas's share is smaller still.

// Per-item budgets, as SECURITY.md states them.
const (
	budgetGoroutinesPerTunnel = 6
	budgetBytesPerTunnel      = 48 << 10
	budgetGoroutinesPerWait   = 8
	budgetBytesPerWait        = 64 << 10
	budgetGoroutinesPerConn   = 4
	budgetBytesPerConn        = 32 << 10
)

// budgetConns is the connection bound the anonymous case runs with (the default, 20 000, is the same
// rule at a size a test should not open).
const budgetConns = 200

type held struct {
	goroutines int
	heap       uint64
}

func measure() held {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return held{goroutines: runtime.NumGoroutine(), heap: m.HeapInuse + m.StackInuse}
}

func (h held) checkPer(t *testing.T, what string, since held, n, goroutines, bytes int) {
	t.Helper()
	dg := h.goroutines - since.goroutines
	db := int64(h.heap) - int64(since.heap)
	t.Logf("%s: %d of them hold %d goroutines (%.1f each) and %d KiB (%.1f KiB each)", what, n, dg, float64(dg)/float64(n), db>>10, float64(db)/float64(n)/1024)
	if dg > n*goroutines {
		t.Errorf("%s: %d goroutines for %d, budget %d each", what, dg, n, goroutines)
	}
	if db > int64(n*bytes) {
		t.Errorf("%s: %d bytes for %d, budget %d each", what, db, n, bytes)
	}
}

func TestBudgetAgentToken(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Agents: -1})
	limit := limits.Default.MaxTunnelsPerAgent
	rc := badDial(t, e.Kas.Addrs().Agent)
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", badBearer(badRawAgent)), time.Minute)
	defer cancel()
	before := measure()
	for range limit {
		s, err := rpc.NewReverseTunnelClient(rc).Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(badTestDescriptor()); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return e.Kas.Registry().Stats().IdleTunnels == int64(limit) }, "kas to hold %d tunnels", limit)
	s, err := rpc.NewReverseTunnelClient(rc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	badWantStatus(t, "one tunnel more", badTunnelEnd(s), codes.ResourceExhausted, "--max-tunnels-per-agent")
	measure().checkPer(t, "tunnels of one agent token", before, limit, budgetGoroutinesPerTunnel, budgetBytesPerTunnel)
}

func TestBudgetCallerToken(t *testing.T) {
	callers, err := auth.NewStaticCallerTokens(map[string][]int64{"hog": nil, "other": nil})
	if err != nil {
		t.Fatal(err)
	}
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) {
		c.Dev, c.Callers = false, callers
		c.FindTimeout = time.Minute
	}})
	limit := limits.Default.MaxWaitingPerCaller
	conn := badDial(t, e.Kas.Addrs().API)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	as := func(token string, agent int) metadata.MD {
		return badAgentMD(fmt.Sprint(agent), "authorization", "Bearer "+token)
	}
	before := measure()
	done := make(chan error, limit)
	for i := range limit {
		// Every call for another absent agent: only the per-caller bound holds them.
		go func() {
			_, err := badRawCall(ctx, conn, badEmptyCall, as("hog", 1000+i), nil)
			done <- err
		}()
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("a waiting call ended: %v", err)
		default:
		}
		return e.Kas.Registry().Stats().WaitingCalls == int64(limit)
	}, "%d calls to wait (%+v)", limit, e.Kas.Registry().Stats())
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer bcancel()
	_, err = badRawCall(bctx, conn, badEmptyCall, as("hog", 1), nil)
	badWantStatus(t, "one call more of the same caller", err, codes.ResourceExhausted, "--max-waiting-calls-per-caller", fmt.Sprint(limit))
	// Another caller is not refused for the first one's calls.
	if _, err := badRawCall(bctx, conn, badEmptyCall, as("other", 1), nil); err != nil {
		t.Errorf("another caller's call: %v", err)
	}
	measure().checkPer(t, "waiting calls of one caller token", before, limit, budgetGoroutinesPerWait, budgetBytesPerWait)
	cancel()
	for range limit {
		<-done
	}
}

func TestBudgetAnonymousClient(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Agents: -1, Kas: func(c *kas.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.Limits.MaxConnections = budgetConns
	}})
	before := measure()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	// Twice the bound, each with the start of a request, as a client that never finishes one would.
	for range 2 * budgetConns {
		c, err := net.DialTimeout("tcp", e.Kas.Addrs().HTTP.String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_, _ = c.Write([]byte("GET /agents/1/ HTTP/1.1\r\n"))
	}
	time.Sleep(500 * time.Millisecond) // let kas take what it will take; the bound is what is checked
	measure().checkPer(t, "connections of an anonymous client", before, budgetConns, budgetGoroutinesPerConn, budgetBytesPerConn)
}

// On the gRPC listeners connections are bounded in time: one that carries no stream is closed after
// the idle connection timeout, whoever opened it.
func TestAnonymousGRPCConnectionsAreClosedWhenIdle(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Agents: -1, Kas: func(c *kas.Config) { c.Limits.IdleConnectionTimeout = 300 * time.Millisecond }})
	for name, addr := range map[string]net.Addr{"agent API": e.Kas.Addrs().Agent, "public API": e.Kas.Addrs().API} {
		t.Run(name, func(t *testing.T) {
			conn := badDial(t, addr)
			conn.Connect()
			testenv.Eventually(t, 10*time.Second, func() bool { return conn.GetState() == connectivity.Ready }, "the connection never came up")
			// kas sends GOAWAY once the connection was idle long enough; the client's channel goes idle.
			testenv.Eventually(t, 10*time.Second, func() bool { return conn.GetState() == connectivity.Idle }, "kas kept an idle connection open")
		})
	}
}
