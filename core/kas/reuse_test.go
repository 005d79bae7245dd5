package kas_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
	"github.com/tunnelbench/tunnelbench/internal/testsvc"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// oneTunnel is an agent with a single tunnel: every call goes through the same Connect stream.
func oneTunnel(_ int64, c *tunclient.Config) {
	c.MinIdle, c.MaxConnections, c.ScaleUpStep = 1, 1, 1
}

// reuseKind is one of the ways a call on a reused tunnel can end.
type reuseKind int

const (
	reuseNormal    reuseKind = iota // answers in full
	reuseCancelled                  // the caller cancels while the service streams
	reuseEarlyEnd                   // the service ends before reading the rest of the request
	reuseDeadline                   // the caller's deadline passes while the service streams
	reuseKinds
)

// reuseCall makes call i of its kind and checks that the caller got exactly its own answer.
func reuseCall(ctx context.Context, c testgrpc.TestServiceClient, i int) error {
	tag := fmt.Sprintf("call-%d", i)
	ctx = metadata.AppendToOutgoingContext(testenv.AgentCtx(ctx, 1), testsvc.EchoInitialKey, tag)
	switch reuseKind(i % int(reuseKinds)) {
	case reuseNormal:
		var hdr metadata.MD
		resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: int32(1 + i%997)}, grpc.Header(&hdr))
		if err != nil {
			return err
		}
		if got := len(resp.GetPayload().GetBody()); got != 1+i%997 || len(hdr.Get(testsvc.EchoInitialKey)) != 1 || hdr.Get(testsvc.EchoInitialKey)[0] != tag {
			return fmt.Errorf("got %d bytes and header %v, want %d bytes and %s", got, hdr.Get(testsvc.EchoInitialKey), 1+i%997, tag)
		}
		return nil
	case reuseCancelled:
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s, err := c.StreamingOutputCall(cctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 7}, {Size: 7, IntervalUs: 10e6}}})
		if err != nil {
			return err
		}
		if _, err := s.Recv(); err != nil {
			return fmt.Errorf("first message: %w", err)
		}
		cancel()
		return wantCode(drainStream(s), codes.Canceled)
	case reuseEarlyEnd:
		s, err := c.FullDuplexCall(ctx)
		if err != nil {
			return err
		}
		// The first request makes the service fail; the ones after it are never read.
		fail := &testpb.StreamingOutputCallRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.FailedPrecondition), Message: tag}}
		_ = s.Send(fail)
		for range 5 {
			if s.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: make([]byte, 1000)}}) != nil {
				break
			}
		}
		err = drainStream(s)
		if status.Convert(err).Message() != tag {
			return fmt.Errorf("status %v, want FailedPrecondition %q", err, tag)
		}
		return wantCode(err, codes.FailedPrecondition)
	default: // reuseDeadline
		dctx, cancel := context.WithTimeout(ctx, 3*time.Millisecond)
		defer cancel()
		s, err := c.StreamingOutputCall(dctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 3, IntervalUs: 10e6}}})
		if errors.Is(err, io.EOF) && errors.Is(dctx.Err(), context.DeadlineExceeded) {
			// The stream ended before the request went out: generated gRPC clients return SendMsg's
			// io.EOF as it is, and the status (the deadline) is the context's.
			return nil
		}
		if err != nil {
			return wantCode(err, codes.DeadlineExceeded)
		}
		return wantCode(drainStream(s), codes.DeadlineExceeded)
	}
}

func drainStream(s interface{ RecvMsg(any) error }) error {
	for {
		if err := s.RecvMsg(&testpb.StreamingOutputCallResponse{}); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func wantCode(err error, want codes.Code) error {
	if status.Code(err) != want {
		return fmt.Errorf("status %v, want %v", err, want)
	}
	return nil
}

// Thousands of calls on one tunnel, alternating normal, cancelled, early-ending and deadline-exceeded
// ones: each caller gets exactly its own answer, and no call's end costs the tunnel.
func TestReusedTunnelCarriesThousandsOfCalls(t *testing.T) {
	const calls = 2000
	e := testenv.Start(t, testenv.Options{Agent: oneTunnel})
	c := testgrpc.NewTestServiceClient(e.Public)
	before := e.Kas.Registry().Counts()
	for i := range calls {
		if err := reuseCall(testCtx(t), c, i); err != nil {
			t.Fatalf("call %d (kind %d): %v", i, i%int(reuseKinds), err)
		}
	}
	// Every call but the deadline ones surely reached the tunnel (a deadline may pass while the call
	// waits for it); the last call's ends cross after its caller has the answer.
	want := int64(calls - calls/int(reuseKinds))
	testenv.Eventually(t, 10*time.Second, func() bool { return e.Kas.Registry().Counts().TunnelsReused-before.TunnelsReused >= want },
		"the tunnel went back to idle %d times after %d calls (%+v)", e.Kas.Registry().Counts().TunnelsReused-before.TunnelsReused, calls, e.Kas.Registry().Counts())
	if opened := e.Kas.Registry().Counts().TunnelsOpened - before.TunnelsOpened; opened != 0 {
		t.Errorf("%d tunnels opened during %d calls, want the one tunnel to carry them all", opened, calls)
	}
}

// Concurrent callers share a few reused tunnels; every one gets its own answers.
func TestReusedTunnelsUnderConcurrentCalls(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Agent: func(_ int64, c *tunclient.Config) { c.MaxConnections = 4 }})
	c := testgrpc.NewTestServiceClient(e.Kas.InternalConn())
	errs := make(chan error, 16)
	for g := range 16 {
		go func() {
			for i := range 100 {
				if err := reuseCall(testCtx(t), c, g*1000+i); err != nil {
					errs <- fmt.Errorf("caller %d call %d: %w", g, i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := e.Kas.Registry().Counts().TunnelsOpened; n > 4 {
		t.Errorf("%d tunnels opened, the agent allows 4", n)
	}
}

// A service that ignores the end of its call costs its tunnel and nothing else: the agent gives the
// tunnel up after its drain timeout, and the next calls go through a new one.
func TestHandlerIgnoringCancelCostsOnlyItsTunnel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stubborn := &grpc.ServiceDesc{
		ServiceName: "tunnelbench.test.Stubborn",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Ignore", ClientStreams: true, ServerStreams: true,
			Handler: func(any, grpc.ServerStream) error {
				<-release // not its context: it goes on after the call ended
				return nil
			}}},
	}
	e := testenv.Start(t, testenv.Options{
		Agent: func(_ int64, c *tunclient.Config) {
			oneTunnel(0, c)
			c.DrainTimeout = 200 * time.Millisecond
		},
		Register: func(_ int64, a *tunclient.Agent) { a.RegisterService(stubborn, nil) },
	})
	before := e.Kas.Registry().Counts()
	ctx, cancel := context.WithTimeout(testenv.AgentCtx(testCtx(t), 1), 100*time.Millisecond)
	defer cancel()
	s, err := e.Public.NewStream(ctx, &stubborn.Streams[0], "/tunnelbench.test.Stubborn/Ignore")
	if err == nil {
		err = s.RecvMsg(&testpb.Empty{})
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("stubborn call: %v, want DeadlineExceeded", err)
	}
	c := testgrpc.NewTestServiceClient(e.Public)
	for i := range 20 {
		if err := reuseCall(testCtx(t), c, i*int(reuseKinds)); err != nil {
			t.Fatalf("call %d after the stubborn one: %v", i, err)
		}
	}
	if opened := e.Kas.Registry().Counts().TunnelsOpened - before.TunnelsOpened; opened != 1 {
		t.Errorf("%d tunnels opened after the stubborn call, want 1 (its own tunnel replaced)", opened)
	}
}

// A call that runs past its tunnel's max connection age finishes, and the tunnel then ends instead of
// going back to idle: rotation costs no call.
func TestMaxConnectionAgeEndsABusyReusedTunnelAfterItsCall(t *testing.T) {
	testtier.Full(t, "runs calls across tunnel deadlines (2 s)")
	e := testenv.Start(t, testenv.Options{
		Kas:   func(c *kas.Config) { c.MaxConnectionAge = time.Second }, // tunnels end 300-350 ms after opening
		Agent: oneTunnel,
	})
	c := testgrpc.NewTestServiceClient(e.Public)
	for i := range 5 {
		// Each call outlives its tunnel's deadline.
		if err := slowCall(testenv.AgentCtx(testCtx(t), 1), c, 400*time.Millisecond); err != nil {
			t.Fatalf("call %d across the tunnel deadline: %v", i, err)
		}
	}
	if reused := e.Kas.Registry().Counts().TunnelsReused; reused != 0 {
		t.Errorf("%d tunnels went back to idle past their deadline", reused)
	}
}

// skewedCalls makes calls calls of every kind (see reuseCall) through a kas and a one-tunnel agent set up
// by kasCfg and agentCfg, as two versions of a rolling upgrade would be, and returns kas's registry counts.
func skewedCalls(t *testing.T, calls int, kasCfg func(*kas.Config), agentCfg func(*tunclient.Config)) registry.Counts {
	t.Helper()
	e := testenv.Start(t, testenv.Options{
		Kas: kasCfg,
		Agent: func(_ int64, c *tunclient.Config) {
			oneTunnel(0, c)
			agentCfg(c)
		},
	})
	c := testgrpc.NewTestServiceClient(e.Public)
	for i := range calls {
		if err := reuseCall(testCtx(t), c, i); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	return e.Kas.Registry().Counts()
}

// Rolling upgrades of batches: an agent that does not offer them and a kas that does not take them each
// get a tunnel that carries one message per gRPC message, and every kind of call (normal, cancelled,
// ending early, past its deadline) works all ways; the same for an agent that does not end tunnels when
// kas asks (rpc.EndTunnel).
func TestBatchesVersionSkew(t *testing.T) {
	for name, tc := range map[string]struct {
		agentNoBatches, kasNoBatches bool
		agentNoEndTunnel             bool
	}{
		"new agent, new kas": {},
		"old agent, new kas": {agentNoBatches: true},
		"new agent, old kas": {kasNoBatches: true},
		// kas reads its tunnels on a goroutine of their own and ends them by returning.
		"agent without EndTunnel, new kas": {agentNoEndTunnel: true},
	} {
		t.Run(name, func(t *testing.T) {
			got := skewedCalls(t, 80,
				func(c *kas.Config) { c.NoTunnelBatches = tc.kasNoBatches },
				func(c *tunclient.Config) {
					c.NoBatches = tc.agentNoBatches
					c.NoEndTunnel = tc.agentNoEndTunnel
				})
			wantBatched := !tc.agentNoBatches && !tc.kasNoBatches
			if got.TunnelsReused == 0 || (got.TunnelsBatched > 0) != wantBatched || wantBatched && got.TunnelsBatched != got.TunnelsOpened {
				t.Fatalf("counts %+v, want reuse, and batches on every tunnel: %v", got, wantBatched)
			}
		})
	}
}

// Rolling upgrades: an agent that does not ask for reuse and a kas that does not offer it each get
// single-use tunnels, and calls work both ways.
func TestReuseVersionSkew(t *testing.T) {
	for name, tc := range map[string]struct {
		agentSingleUse, kasSingleUse bool
		wantReuse                    bool
	}{
		"new agent, new kas":       {wantReuse: true},
		"old agent, new kas":       {agentSingleUse: true},
		"new agent, old kas":       {kasSingleUse: true},
		"old agent and kas (seed)": {agentSingleUse: true, kasSingleUse: true},
	} {
		t.Run(name, func(t *testing.T) {
			got := skewedCalls(t, 40,
				func(c *kas.Config) { c.SingleUseTunnels = tc.kasSingleUse },
				func(c *tunclient.Config) { c.SingleUse = tc.agentSingleUse })
			if reused := got.TunnelsReused > 0; reused != tc.wantReuse {
				t.Fatalf("tunnels reused: %v (%+v), want %v", reused, got, tc.wantReuse)
			}
		})
	}
}

// An agent that offers to end tunnels when kas asks (Descriptor.ends_on_request) and then ignores kas's
// EndTunnel keeps only what it had: each ended tunnel holds its place in the agent's tunnel limit until
// the stream closes, which kas's connection rotation does at the latest (its GOAWAY, then the grace).
func TestAgentIgnoringEndTunnelKeepsOnlyItsPlaces(t *testing.T) {
	testtier.Full(t, "waits for a connection's max age and grace (about 3 s)")
	const (
		maxAge  = 3 * time.Second
		limit   = 2
		agentID = 7
	)
	e := testenv.Start(t, testenv.Options{Kas: func(c *kas.Config) {
		c.MaxConnectionAge = maxAge
		c.Limits.MaxTunnelsPerAgent = limit
	}})
	conn := badDial(t, e.Kas.Addrs().Agent)
	ctx := metadata.AppendToOutgoingContext(badCtx(t), "authorization", badBearer(agentID))
	desc := badTestDescriptor()
	desc.GetDescriptor_().Reuse = true
	desc.GetDescriptor_().EndsOnRequest = true
	ends := make(chan *rpc.ConnectResponse, limit)
	for range limit {
		s, err := rpc.NewReverseTunnelClient(conn).Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(desc); err != nil {
			t.Fatal(err)
		}
		go func() { // reads kas's EndTunnel and does nothing about it
			m, err := s.Recv()
			if err == nil {
				ends <- m
			}
			_ = badTunnelEnd(s)
		}()
	}
	for range limit {
		select {
		case m := <-ends:
			if m.GetEndTunnel().GetReason() != rpc.EndReasonMaxAge {
				t.Fatalf("kas sent %v at the tunnel's deadline, want EndTunnel for %s", m, rpc.EndReasonMaxAge)
			}
		case <-time.After(maxAge):
			t.Fatal("no EndTunnel at the tunnel's deadline")
		}
	}
	// The ended tunnels are still open: the agent has no place for another.
	s, err := rpc.NewReverseTunnelClient(conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := badTunnelEnd(s); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "ended but not yet closed by the agent") {
		t.Fatalf("a tunnel beside %d ignored EndTunnels: %v, want ResourceExhausted for the ended ones", limit, err)
	}
	// kas's rotation closes the connection within the grace; then the places are free again.
	badWaitFor(t, "the ended tunnels to close", func() error {
		fresh := badDial(t, e.Kas.Addrs().Agent)
		s, err := rpc.NewReverseTunnelClient(fresh).Connect(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(desc); err != nil {
			return err
		}
		recv := make(chan error, 1)
		go func() { _, err := s.Recv(); recv <- err }()
		select {
		case err := <-recv:
			return fmt.Errorf("tunnel refused: %v", err)
		case <-time.After(200 * time.Millisecond):
			return nil // taken: kas refuses at once
		}
	})
}
