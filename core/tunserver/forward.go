package tunserver

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// DefaultReplayLimit bounds the request bytes kept to replay a call on another tunnel when the agent
// withdraws the first one before accepting the call. Calls with more request data in flight fail instead
// in that (rare) race.
const DefaultReplayLimit = 4 << 20

// errRetryOtherTunnel: the tunnel could not take the call, and nothing the agent did with it can have had
// an effect; the call may go to another tunnel.
var errRetryOtherTunnel = errors.New("tunnel withdrawn before it accepted the call")

// idleResultErr is the Connect status for what the agent sent on a tunnel that had no call.
func idleResultErr(res recvResult) error {
	switch {
	case res.err == io.EOF:
		return nil // the agent withdrew the idle tunnel: a clean end
	case res.err != nil:
		return res.err
	default:
		c := rpc.NewChecker(rpc.AgentToKas)
		_ = c.Next(rpc.StateDescriptor)
		return c.Next(rpc.AgentState(res.msg))
	}
}

func earlyErr(t *Tunnel) error {
	if t.early == nil {
		return nil
	}
	return idleResultErr(*t.early)
}

// readLoop is the tunnel's only reader. While the tunnel is idle or found it watches for the agent
// withdrawing or breaking the tunnel; while forwarding it hands every message to the call.
func (t *Tunnel) readLoop(r *Registry) {
	forwarding := false
	for {
		msg, err := t.stream.Recv()
		res := recvResult{msg: msg, err: err}
		if !forwarding {
			if r.onReaderResult(t, res) {
				return
			}
			forwarding = true
		}
		select {
		case t.recvCh <- res:
		case <-t.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// startForwarding moves a found tunnel to forwarding. It fails with errRetryOtherTunnel when the agent
// withdrew or broke the tunnel while it was found: nothing was sent, so another tunnel may take the call.
func (t *Tunnel) startForwarding(r *Registry) error {
	t.mu.Lock()
	if t.state == TunnelFound && t.early == nil {
		err := t.moveLocked(TunnelForwarding)
		t.mu.Unlock()
		return err
	}
	t.mu.Unlock()
	r.finish(t, earlyErr(t), "")
	return errRetryOtherTunnel
}

// requestPump copies the caller's request frames into the current tunnel. Until the agent accepts the
// call (its first message), it keeps what it sent so that the call can move to another tunnel.
type requestPump struct {
	src   grpc.ServerStream
	limit int

	accepted atomic.Bool

	mu         sync.Mutex // serializes sends to the tunnel, in order
	tun        *Tunnel
	info       *rpc.ConnectResponse
	log        []*rpc.ConnectResponse
	logBytes   int
	replayable bool
	started    bool
}

func newRequestPump(src grpc.ServerStream, info *rpc.RequestInfo, limit int) *requestPump {
	return &requestPump{
		src:        src,
		limit:      limit,
		info:       &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: info}},
		replayable: true,
	}
}

// attach sends the request info, and everything sent to a previous tunnel, to t; then the pump feeds t.
func (p *requestPump) attach(t *Tunnel) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := t.send(p.info); err != nil {
		return err
	}
	for _, m := range p.log {
		if err := t.send(m); err != nil {
			return err
		}
	}
	p.tun = t
	if !p.started {
		p.started = true
		go p.run()
	}
	return nil
}

// detach stops feeding the current tunnel. It reports whether the call can be replayed on another one.
func (p *requestPump) detach() (replayable bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tun = nil
	return p.replayable
}

// accept drops the replay log: the agent has the call. It never blocks, so that the response direction
// never waits for the request direction.
func (p *requestPump) accept() {
	p.accepted.Store(true)
}

// run ends when the caller half-closes or the call ends (the handler returns and RecvMsg fails).
func (p *requestPump) run() {
	for {
		var f grpctool.RawFrame
		err := p.src.RecvMsg(&f)
		var m *rpc.ConnectResponse
		switch {
		case err == io.EOF:
			m = &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CloseSend{CloseSend: &rpc.CloseSend{}}}
		case err != nil:
			return // the call is over; the forwarder has the outcome
		default:
			m = &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: f.Data}}}
		}
		p.mu.Lock()
		p.record(m, len(f.Data))
		if p.tun != nil {
			// A failed send means the tunnel is ending; the forwarder learns why from the tunnel's reader.
			_ = p.tun.send(m)
		}
		p.mu.Unlock()
		if err == io.EOF {
			return
		}
	}
}

func (p *requestPump) record(m *rpc.ConnectResponse, size int) {
	if p.accepted.Load() {
		p.log = nil
		p.replayable = false
		return
	}
	if !p.replayable {
		return
	}
	p.logBytes += size
	if p.logBytes > p.limit {
		p.log = nil
		p.replayable = false
		return
	}
	p.log = append(p.log, m)
}

// forward carries one call over the tunnel: the request through pump, every agent message to sink. It
// returns errRetryOtherTunnel when the call should go to another tunnel, the caller's context error when
// the caller went away, a status for the caller when the tunnel broke, or nil when the agent's answer
// (including a final error status) went to sink.
func (t *Tunnel) forward(ctx context.Context, r *Registry, pump *requestPump, sink func(*rpc.ConnectRequest) error) error {
	if err := t.startForwarding(r); err != nil {
		return err
	}
	if err := pump.attach(t); err != nil {
		// The stream ended under us: the reader will say why; nothing reached the agent's service.
		pump.detach()
		r.finish(t, nil, "")
		return errRetryOtherTunnel
	}
	checker := rpc.NewChecker(rpc.AgentToKas)
	_ = checker.Next(rpc.StateDescriptor)
	for {
		var res recvResult
		select {
		case res = <-t.recvCh:
		case <-ctx.Done():
			pump.detach()
			r.finish(t, status.Error(codes.Canceled, "the caller cancelled the call"), "")
			return ctx.Err()
		}
		if res.err == io.EOF {
			if err := checker.Next(rpc.StateEOF); err != nil {
				pump.detach()
				r.finish(t, err, "")
				return status.Errorf(codes.Unavailable, "agent %d ended the tunnel mid-call: %v", t.agentID, status.Convert(err).Message())
			}
			if checker.State() == rpc.StateEOF && !pump.accepted.Load() {
				// The agent withdrew the tunnel before it saw the call.
				replayable := pump.detach()
				r.finish(t, nil, "")
				if replayable {
					return errRetryOtherTunnel
				}
				return status.Errorf(codes.Unavailable, "agent %d withdrew the tunnel as the call arrived and the request was too large to replay", t.agentID)
			}
			r.finish(t, nil, "")
			return nil
		}
		if res.err != nil {
			pump.detach()
			r.finish(t, res.err, "")
			return status.Errorf(codes.Unavailable, "tunnel to agent %d broke: %v", t.agentID, status.Convert(res.err).Message())
		}
		st := rpc.AgentState(res.msg)
		if err := checker.Next(st); err != nil {
			pump.detach()
			r.finish(t, err, "")
			return status.Errorf(codes.Unavailable, "agent %d broke the tunnel protocol: %v", t.agentID, status.Convert(err).Message())
		}
		pump.accept()
		if err := sink(res.msg); err != nil {
			pump.detach()
			r.finish(t, status.Error(codes.Canceled, "the caller went away"), "")
			return err
		}
		if st == rpc.StateError {
			pump.detach()
			r.finish(t, nil, "")
			return nil
		}
	}
}
