package registry

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
)

// TunnelDeadline is when kas ends an idle tunnel stream: at 30% of the max connection age plus up to 5%
// positive jitter. The connection's GOAWAY comes at 20% ±10% of that, so the deadline always fires after
// it and the agent's replacement tunnel opens on a fresh connection.
func TunnelDeadline(maxConnectionAge time.Duration) time.Duration {
	base := maxConnectionAge * 30 / 100
	jitter := maxConnectionAge * 5 / 100
	if jitter <= 0 {
		return base
	}
	return base + rand.N(jitter)
}

// Tunnel options for Serve.
type TunnelOptions struct {
	// MaxSend is the largest message the stream may send (the server's grpc.MaxSendMsgSize); zero: not
	// checked before sending.
	MaxSend int
	// MaxConnectionAge > 0 ends the tunnel at its TunnelDeadline: at once when idle, after its call
	// otherwise.
	MaxConnectionAge time.Duration
	// Reuse: the tunnel carries call after call (the agent asked for it and kas offered it).
	Reuse bool
	// Batches: kas may send rpc.ResponseBatch (the agent offered batches on a reusable tunnel and kas
	// took them; the stream then unpacks the agent's, see rpc.BatchedConnectServer).
	Batches bool
	// Drain bounds the wait for the agent's call_end once kas ended a call; zero means DefaultDrain.
	Drain time.Duration
	// AgentEnds: the agent ends a reusable tunnel when kas sends rpc.EndTunnel
	// (Descriptor.ends_on_request), so the Connect handler reads the tunnel itself (see readInline).
	AgentEnds bool
}

// DefaultDrain is how long an agent has to end a call (its call_end) once kas ended it, before kas ends
// the tunnel: the agent's own drain timeout.
const DefaultDrain = 10 * time.Second

// Serve holds the agent's reserved place (see Reserve) as a tunnel on stream, whose descriptor desc
// was read, until the tunnel ends. It returns why it ended, for the rpc.TunnelEndReasonKey trailer
// (empty for none), and the status the Connect handler returns.
func (r *Registry) Serve(agentID int64, desc descriptor.Index, stream rpc.ReverseTunnel_ConnectServer, opts TunnelOptions) (reason string, err error) {
	t := newTunnel(r, agentID, desc, stream)
	t.maxSend = opts.MaxSend
	t.reuse = opts.Reuse
	t.out.Batches = opts.Reuse && opts.Batches
	t.drain = cmp.Or(opts.Drain, DefaultDrain)
	t.agentEnds = opts.Reuse && opts.AgentEnds
	if err := r.addTunnel(t); err != nil {
		if status.Code(err) == codes.ResourceExhausted {
			return "", err
		}
		return rpc.EndReasonShutdown, nil
	}
	if t.agentEnds {
		r.readInline(t, opts.MaxConnectionAge)
	} else {
		r.readAside(t, opts.MaxConnectionAge)
	}
	t.out.Close()
	t.mu.Lock()
	reason, endErr := t.endReason, t.endErr
	t.mu.Unlock()
	if endErr != nil {
		r.log.Debug("tunnel ended", "agent_id", agentID, "err", endErr)
	}
	return reason, handlerStatus(endErr)
}

// handlerStatus is the status the Connect handler returns for a tunnel that ended with err.
func handlerStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); !ok {
		return status.Error(codes.Unavailable, fmt.Sprintf("tunnel ended: %v", err))
	}
	return err
}

// readAside reads the tunnel on a goroutine of its own while the Connect handler waits for the tunnel to
// end: kas ends the stream by returning from the handler, which ends that read too.
func (r *Registry) readAside(t *Tunnel, maxConnectionAge time.Duration) {
	go t.readLoop(r)
	var expire <-chan time.Time
	if maxConnectionAge > 0 {
		timer := time.NewTimer(TunnelDeadline(maxConnectionAge))
		defer timer.Stop()
		expire = timer.C
	}
	select {
	case <-t.done:
	case <-expire:
		r.expire(t, rpc.EndReasonMaxAge)
		<-t.done
	}
}

// readInline reads the tunnel on the Connect handler's goroutine, for an agent that ends a tunnel when
// kas asks (rpc.EndTunnel): nothing can end a server's read of its own stream but the stream's end, so
// kas ends the tunnel by asking the agent (see finishLocked), one goroutine per tunnel instead of two.
// Until the read ends the tunnel keeps its place in the agent's tunnel limit, however long the agent
// takes.
func (r *Registry) readInline(t *Tunnel, maxConnectionAge time.Duration) {
	if maxConnectionAge > 0 {
		timer := time.AfterFunc(TunnelDeadline(maxConnectionAge), func() { r.expire(t, rpc.EndReasonMaxAge) })
		defer timer.Stop()
	}
	t.readLoop(r)
	// The read ended: the agent left or broke the stream, or ended it as kas asked. Whatever the tunnel
	// still carries ends with it (as with readAside, whoever found it ends it).
	<-t.done
	r.streamClosed(t)
}
