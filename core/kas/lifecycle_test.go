package kas_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// countingListener counts accepted connections: each is one agent connection to kas.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// slowCall is a call that takes about d: one message now, one after d.
func slowCall(ctx context.Context, c testgrpc.TestServiceClient, d time.Duration) error {
	s, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{
		{Size: 10}, {Size: 10, IntervalUs: int32(d / time.Microsecond)},
	}})
	if err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func TestMaxConnectionAgeUnderLoad(t *testing.T) {
	testtier.Full(t, "runs 10 s of load")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l}
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) {
		c.AgentListen, c.AgentListener = "", cl
		c.MaxConnectionAge = 2 * time.Second
	}})
	connsAtStart := cl.accepted.Load()
	c := testgrpc.NewTestServiceClient(e.Public)
	ctx := testenv.AgentCtx(testCtx(t), 1)
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				var err error
				if w == 0 {
					err = slowCall(ctx, c, 150*time.Millisecond)
				} else {
					_, err = c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 100})
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	rotated := cl.accepted.Load() - connsAtStart
	t.Logf("%d calls ok, %d failed, %d new agent connections", ok.Load(), failed.Load(), rotated)
	if failed.Load() != 0 {
		t.Fatalf("%d calls failed during rotation, first: %v", failed.Load(), firstErr.Load())
	}
	// GOAWAY comes at 20% of the age (±10%): about every 0.4 s, so 10 s must see many new connections.
	if rotated < 5 {
		t.Fatalf("only %d new agent connections in 10 s: connections were not rotated", rotated)
	}
}

func TestKasShutdownWithCallsInFlight(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) { c.FindTimeout = 20 * time.Second }})
	c := testgrpc.NewTestServiceClient(e.Public)
	ctx := testenv.AgentCtx(testCtx(t), 1)
	inflight := make(chan error, 1)
	started := e.Agents[1].Service.Watch()
	go func() { inflight <- slowCall(ctx, c, 500*time.Millisecond) }()
	<-started
	waiting := make(chan error, 1)
	go func() {
		_, err := c.EmptyCall(testenv.AgentCtx(testCtx(t), 7), &testpb.Empty{})
		waiting <- err
	}()
	testenv.Eventually(t, 5*time.Second, func() bool { return e.Kas.Registry().Stats().WaitingCalls == 1 }, "call never waited")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.ShutdownKas(sctx)
	if err := <-inflight; err != nil {
		t.Fatalf("call in flight: %v", err)
	}
	err := <-waiting
	if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "kas is shutting down" {
		t.Fatalf("waiting call: %v", err)
	}
	if st := e.Kas.Registry().Stats(); st.IdleTunnels != 0 || st.BusyTunnels != 0 || st.ConnectedAgents != 0 {
		t.Fatalf("tunnels left after shutdown: %+v", st)
	}
}

func TestKasShutdownGraceCutsLongCalls(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) { c.ShutdownGrace = 300 * time.Millisecond }})
	c := testgrpc.NewTestServiceClient(e.Public)
	started := e.Agents[1].Service.Watch()
	done := make(chan error, 1)
	go func() { done <- slowCall(testenv.AgentCtx(testCtx(t), 1), c, time.Minute) }()
	<-started
	start := time.Now()
	e.ShutdownKas(context.Background())
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v with a 300ms grace", d)
	}
	if err := <-done; status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Fatalf("cut call: %v", err)
	}
}

func TestAgentStopLetsCallsFinish(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Kas: shortFind})
	c := testgrpc.NewTestServiceClient(e.Public)
	ae := e.Agents[1]
	started := ae.Service.Watch()
	done := make(chan error, 1)
	go func() { done <- slowCall(testenv.AgentCtx(testCtx(t), 1), c, 500*time.Millisecond) }()
	<-started
	stopped := make(chan struct{})
	go func() {
		e.StopAgent(ae)
		close(stopped)
	}()
	if err := <-done; err != nil {
		t.Fatalf("call in flight during agent stop: %v", err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("agent stop did not return")
	}
	testenv.Eventually(t, 5*time.Second, func() bool {
		st := e.Kas.Registry().Stats()
		return st.IdleTunnels == 0 && st.BusyTunnels == 0
	}, "kas still holds tunnels of the stopped agent: %+v", e.Kas.Registry().Stats())
	if _, err := c.EmptyCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call to a stopped agent: %v", err)
	}
}

func TestAgentReconnectsAfterKasRestart(t *testing.T) {
	// The agent keeps trying with backoff while kas is away and comes back when a kas listens again.
	e := testenv.Start(t, testenv.Options{})
	addr := e.Kas.Addrs().Agent.String()
	e.ShutdownKas(context.Background())
	ae := e.Agents[1]
	testenv.Eventually(t, 5*time.Second, func() bool {
		return testenv.Value(testenv.Scrape(t, ae.Metrics)["tunnel_agent_connect_errors_total"], "code", "Unavailable") > 0
	}, "no connect error counted while kas was down")
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	k2 := testenv.Start(t, testenv.Options{Agents: -1, Kas: func(c *kas.Config) { c.AgentListen, c.AgentListener = "", l }})
	testenv.Eventually(t, 10*time.Second, func() bool { return k2.Kas.Registry().Stats().IdleTunnels >= int64(tunclient.DefaultMinIdle) }, "agent never reconnected")
}
