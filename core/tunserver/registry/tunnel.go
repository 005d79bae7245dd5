package registry

import (
	"fmt"
	"sync"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/tunnelwriter"
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
	// pooled is the buffer of msg's payload when it is pooled (see rpc.PooledRequestReceiver); only a
	// sink hands it on, anything else leaves it to the garbage collector.
	pooled *[]byte
	// more: the agent sent more of the call's answer in the same batch, which follows at once (see Sink).
	more bool
	err  error
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
	// agentEnds: kas ends the tunnel by asking the agent (rpc.EndTunnel) and the Connect handler reads
	// the stream itself (see readInline).
	agentEnds bool
	// closing: the tunnel is done but the agent has not closed its stream yet; it is counted in its
	// agent's closing tunnels meanwhile (guarded by the stripe lock).
	closing bool

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

	// out is the only way to the agent: every send goes through it.
	out tunnelwriter.Writer
}

func newTunnel(r *Registry, agentID int64, desc descriptor.Index, stream rpc.ReverseTunnel_ConnectServer) *Tunnel {
	return &Tunnel{
		reg:     r,
		agentID: agentID,
		desc:    desc,
		stream:  stream,
		done:    make(chan struct{}),
		out:     tunnelwriter.Writer{Stream: stream},
	}
}

// AgentID is the id of the agent that opened the tunnel.
func (t *Tunnel) AgentID() int64 { return t.agentID }

// OneRequest reports whether the agent said, in this tunnel's descriptor, that the method's caller
// sends one request message: kas then reads the request and its half-close when the call starts.
func (t *Tunnel) OneRequest(service, method string) bool { return t.desc.OneRequest(service, method) }

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
