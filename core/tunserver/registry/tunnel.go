package registry

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
)

// TunnelState is where a tunnel is in its life. Every change goes through move, which checks it against
// tunnelTransitions.
type TunnelState int

const (
	// TunnelIdle: in the registry, waiting for a call.
	TunnelIdle TunnelState = iota + 1
	// TunnelFound: handed to a call (or to a gateway that waits for start_streaming), nothing sent yet.
	TunnelFound
	// TunnelForwarding: carrying a call.
	TunnelForwarding
	// TunnelDone: ended; never used again.
	TunnelDone
)

func (s TunnelState) String() string {
	switch s {
	case TunnelIdle:
		return "idle"
	case TunnelFound:
		return "found"
	case TunnelForwarding:
		return "forwarding"
	case TunnelDone:
		return "done"
	default:
		return fmt.Sprintf("TunnelState(%d)", int(s))
	}
}

// tunnelTransitions is the whole life of a tunnel:
//
//	idle -> found       a call (or a gateway) took it
//	idle -> done        the agent withdrew it or went away, max connection age, kas shutdown
//	found -> idle       the call gave up or was served elsewhere: the tunnel goes back, unused
//	found -> forwarding the call started streaming
//	found -> done       the tunnel broke or expired while found
//	forwarding -> idle  a reusable tunnel's call ended on both sides (call_end each way)
//	forwarding -> done  a single-use tunnel's call ended; a reusable one broke, expired or its agent did
//	                    not end the call in time
var tunnelTransitions = map[TunnelState][]TunnelState{
	TunnelIdle:       {TunnelFound, TunnelDone},
	TunnelFound:      {TunnelIdle, TunnelForwarding, TunnelDone},
	TunnelForwarding: {TunnelIdle, TunnelDone},
}

func transitionAllowed(from, to TunnelState) bool {
	for _, s := range tunnelTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// recvResult is one Recv on the tunnel stream.
type recvResult struct {
	msg *rpc.ConnectRequest
	err error
}

// Tunnel is kas's end of one Connect stream from an agent.
type Tunnel struct {
	reg     *Registry
	agentID int64
	desc    descriptor.Index
	stream  rpc.ReverseTunnel_ConnectServer
	// maxSend is the largest message the stream may send (0: not checked here).
	maxSend int
	// reuse: the tunnel carries call after call (both ends agreed at its start).
	reuse bool
	// drain bounds the wait for the agent's call_end once kas sent its own.
	drain time.Duration

	mu    sync.Mutex
	state TunnelState
	// owner is the claim (a FindHandle, or a waiting call's request) the tunnel was last found for.
	owner any
	// early is what the stream reader got while the tunnel was found but not yet forwarding: the agent
	// withdrew the tunnel (EOF), broke it, or sent something it must not. Nothing was sent to the agent
	// yet, so the call can safely use another tunnel.
	early *recvResult
	// expired: the max connection age passed or kas is stopping while the tunnel was not idle; it ends
	// instead of going back to idle.
	expired   bool
	endReason string
	endErr    error

	// fwd is the call the tunnel carries, once forwarding; nil again once the agent ended it.
	fwd *forwarding
	// done is closed when the tunnel reaches TunnelDone; the Connect handler then returns endErr.
	done chan struct{}

	sendMu     sync.Mutex
	sendClosed atomic.Bool
	// endHeld: kas's call_end of the last call is still to be sent (see holdCallEnd); endFlush sends it
	// when no other message does first. Both guarded by sendMu.
	endHeld  bool
	endFlush *time.Timer
}

func newTunnel(r *Registry, agentID int64, desc descriptor.Index, stream rpc.ReverseTunnel_ConnectServer) *Tunnel {
	return &Tunnel{
		reg:     r,
		agentID: agentID,
		desc:    desc,
		stream:  stream,
		done:    make(chan struct{}),
	}
}

// AgentID is the id of the agent that opened the tunnel.
func (t *Tunnel) AgentID() int64 { return t.agentID }

// State is the tunnel's current state.
func (t *Tunnel) State() TunnelState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state
}

// moveLocked changes the state or reports an impossible transition. t.mu must be held.
func (t *Tunnel) moveLocked(to TunnelState) error {
	if !transitionAllowed(t.state, to) {
		return fmt.Errorf("tunnel of agent %d: impossible transition %s -> %s", t.agentID, t.state, to)
	}
	t.state = to
	if to == TunnelDone {
		close(t.done)
	}
	return nil
}

// send writes one message to the agent unless the Connect handler has finished (or is finishing). A held
// call_end goes first.
func (t *Tunnel) send(m *rpc.ConnectResponse) error {
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	if t.sendClosed.Load() {
		return errTunnelClosed
	}
	if t.endHeld {
		t.endHeld = false
		if err := t.stream.Send(callEndOK); err != nil {
			return err
		}
	}
	return t.stream.Send(m)
}

// CallEndDelay is how long kas may hold the call_end of a call that completed (the agent's answer is
// all in) before sending it alone. Held, it leaves in the same write as the next call's request_info
// when that call comes sooner, as it does under load: on a link of a few microseconds every write and
// wake-up counts, and a call through kas's public API saves one of its six. The agent's view of the
// tunnel does not change: it is busy until kas's call_end, so the agent may open its next spare tunnel
// up to this much later. Far below any agent's drain timeout (10 s by default).
const CallEndDelay = time.Millisecond

// holdCallEnd sends kas's call_end of a completed call with the tunnel's next message, or after
// CallEndDelay.
func (t *Tunnel) holdCallEnd() {
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	t.endHeld = true
	if t.endFlush == nil {
		t.endFlush = time.AfterFunc(CallEndDelay, t.flushCallEnd)
		return
	}
	t.endFlush.Reset(CallEndDelay)
}

// flushCallEnd sends a call_end that is still held. A failed send is the stream's end, which the
// reader reports.
func (t *Tunnel) flushCallEnd() {
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	if !t.endHeld || t.sendClosed.Load() {
		return
	}
	t.endHeld = false
	_ = t.stream.Send(callEndOK)
}

// closeSendWait bounds how long the Connect handler waits for a send in progress before it returns.
const closeSendWait = time.Second

// closeSend forbids further sends and waits for a send in progress, at most closeSendWait: after it the
// Connect handler may return. A send still in progress then is blocked on flow control by an agent that
// stopped reading, and only the handler's return ends the stream and so that send (gRPC's SendMsg returns
// once the stream is done): waiting for it would leave the tunnel, its call and this handler to the
// agent's mercy.
func (t *Tunnel) closeSend() {
	t.sendClosed.Store(true)
	if t.sendMu.TryLock() { // no send in progress: the common case
		t.stopFlushLocked()
		t.sendMu.Unlock()
		return
	}
	sent := make(chan struct{})
	go func() {
		t.sendMu.Lock()
		t.stopFlushLocked()
		t.sendMu.Unlock()
		close(sent)
	}()
	timer := time.NewTimer(closeSendWait)
	defer timer.Stop()
	select {
	case <-sent:
	case <-timer.C:
	}
}

// stopFlushLocked stops a pending flush of a held call_end: the stream ends without it (the agent then
// takes the tunnel for ended, whatever its state). t.sendMu must be held.
func (t *Tunnel) stopFlushLocked() {
	if t.endFlush != nil {
		t.endFlush.Stop()
	}
}

var errTunnelClosed = status.Error(codes.Unavailable, "tunnel closed")
