package registry

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// agentStream is an agent's Connect stream as kas's handler sees it: Recv waits until the agent closes
// the stream (close), and what kas sends arrives on sent.
type agentStream struct {
	rpc.ReverseTunnel_ConnectServer
	closed chan struct{}
	sent   chan *rpc.ConnectResponse
}

func newAgentStream() *agentStream {
	return &agentStream{closed: make(chan struct{}), sent: make(chan *rpc.ConnectResponse, 16)}
}

func (s *agentStream) Recv() (*rpc.ConnectRequest, error) {
	<-s.closed
	return nil, status.Error(codes.Canceled, "the agent cancelled the stream")
}

func (s *agentStream) Send(m *rpc.ConnectResponse) error {
	s.sent <- m
	return nil
}

func (s *agentStream) Context() context.Context { return context.Background() }

// next is the next message kas sent, within waitBound.
func (s *agentStream) next(t *testing.T) *rpc.ConnectResponse {
	t.Helper()
	select {
	case m := <-s.sent:
		return m
	case <-time.After(waitBound):
		t.Fatal("kas sent nothing")
		return nil
	}
}

type served struct {
	reason string
	err    error
}

// serve runs Serve for agent 1 on stream, as the Connect handler would, and reports its result.
func serve(t *testing.T, r *Registry, stream *agentStream, opts TunnelOptions) <-chan served {
	t.Helper()
	if err := r.Reserve(1); err != nil {
		t.Fatal(err)
	}
	out := make(chan served, 1)
	go func() {
		reason, err := r.Serve(1, desc(t), stream, opts)
		out <- served{reason, err}
	}()
	return out
}

func waitIdle(t *testing.T, r *Registry, n int64) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for r.Stats().IdleTunnels != n {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want %d idle tunnels", r.Stats(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A tunnel of an agent that ends tunnels when asked is read by its Connect handler alone: one goroutine
// per tunnel where an older agent's costs two.
func TestInlineReadIsTheHandlersOwn(t *testing.T) {
	for name, agentEnds := range map[string]bool{"agent ends when asked": true, "older agent": false} {
		t.Run(name, func(t *testing.T) {
			r := New(nil, 0)
			const tunnels = 8
			var streams []*agentStream
			var results []<-chan served
			for range tunnels {
				s := newAgentStream()
				streams = append(streams, s)
				results = append(results, serve(t, r, s, TunnelOptions{Reuse: true, AgentEnds: agentEnds}))
			}
			waitIdle(t, r, tunnels)
			wantAside := 0
			if !agentEnds {
				wantAside = tunnels
			}
			// Readers of older agents' tunnels start just after their tunnels join.
			deadline := time.Now().Add(waitBound)
			reading, aside := readers()
			for (reading != tunnels || aside != wantAside) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
				reading, aside = readers()
			}
			if reading != tunnels || aside != wantAside {
				t.Errorf("%d tunnels read, %d of them on goroutines of their own; want %d and %d", reading, aside, tunnels, wantAside)
			}
			for i, s := range streams {
				close(s.closed)
				<-results[i]
			}
		})
	}
}

// readers counts the goroutines reading a tunnel, and those of them that are not a Connect handler.
func readers() (reading, aside int) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !strings.Contains(g, "registry.(*Tunnel).readLoop") {
			continue
		}
		reading++
		if strings.Contains(g, "created by github.com/tunnelbench/tunnelbench/core/tunserver/registry.(*Registry).readAside") {
			aside++
		}
	}
	return reading, aside
}

// kas ends an inline-read tunnel by asking the agent: EndTunnel with the reason, and the tunnel keeps
// its place in the agent's tunnel limit until the agent closes the stream, however long that takes.
func TestInlineTunnelEndsWhenTheAgentCloses(t *testing.T) {
	r := New(nil, 0)
	r.SetLimits(Limits{MaxTunnelsPerAgent: 1}, nil)
	stream := newAgentStream()
	result := serve(t, r, stream, TunnelOptions{Reuse: true, AgentEnds: true, MaxConnectionAge: 10 * time.Millisecond})
	end := stream.next(t).GetEndTunnel()
	if end == nil || end.GetReason() != rpc.EndReasonMaxAge || end.GetStatus() != nil {
		t.Fatalf("kas sent %v at the max age, want an EndTunnel with reason %q and no status", end, rpc.EndReasonMaxAge)
	}
	waitIdle(t, r, 0)
	wantStats(t, r, Stats{ClosingTunnels: 1})
	err := r.Reserve(1)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "1 ended but not yet closed by the agent") {
		t.Fatalf("a tunnel while the ended one is still open: %v, want ResourceExhausted for the agent's limit", err)
	}
	select {
	case res := <-result:
		t.Fatalf("the handler returned %v before the agent closed the stream", res)
	case <-time.After(20 * time.Millisecond):
	}
	close(stream.closed)
	res := <-result
	if res.reason != rpc.EndReasonMaxAge || res.err != nil {
		t.Fatalf("Serve returned %q, %v; want the reason %q and no error", res.reason, res.err, rpc.EndReasonMaxAge)
	}
	wantStats(t, r, Stats{})
	if err := r.Reserve(1); err != nil {
		t.Fatalf("after the agent closed the ended tunnel: %v", err)
	}
	r.CancelReservation(1)
	select {
	case m := <-stream.sent:
		t.Fatalf("kas sent %v after EndTunnel", m)
	default:
	}
}

// What kas tells the agent in EndTunnel is what its handler would have returned.
func TestEndTunnelCarriesTheHandlersStatus(t *testing.T) {
	r := New(nil, 0)
	stream := newAgentStream()
	result := serve(t, r, stream, TunnelOptions{Reuse: true, AgentEnds: true})
	waitIdle(t, r, 1)
	r.Stop()
	end := stream.next(t).GetEndTunnel()
	if end.GetReason() != rpc.EndReasonShutdown || end.GetStatus() != nil {
		t.Fatalf("kas sent %v on shutdown, want EndTunnel with reason %q", end, rpc.EndReasonShutdown)
	}
	close(stream.closed)
	if res := <-result; res.reason != rpc.EndReasonShutdown || res.err != nil {
		t.Fatalf("Serve returned %+v", res)
	}

	msg := rpc.EndTunnelMessage("", handlerStatus(status.Error(codes.InvalidArgument, "agent->kas: trailer is not allowed after start")))
	if st := msg.GetEndTunnel().GetStatus(); codes.Code(st.GetCode()) != codes.InvalidArgument || !strings.Contains(st.GetMessage(), "trailer is not allowed") {
		t.Fatalf("EndTunnel for a violation: %v", st)
	}
	if st := rpc.EndTunnelMessage("", handlerStatus(context.DeadlineExceeded)).GetEndTunnel().GetStatus(); codes.Code(st.GetCode()) != codes.Unavailable {
		t.Fatalf("EndTunnel for a plain error: %v, want Unavailable as the handler returns", st)
	}
}
