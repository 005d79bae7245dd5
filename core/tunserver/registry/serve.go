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
	if err := r.addTunnel(t); err != nil {
		if status.Code(err) == codes.ResourceExhausted {
			return "", err
		}
		return rpc.EndReasonShutdown, nil
	}
	go t.readLoop(r)

	var expire <-chan time.Time
	if opts.MaxConnectionAge > 0 {
		timer := time.NewTimer(TunnelDeadline(opts.MaxConnectionAge))
		defer timer.Stop()
		expire = timer.C
	}
	select {
	case <-t.done:
	case <-expire:
		r.expire(t, rpc.EndReasonMaxAge)
		<-t.done
	}
	t.out.Close()
	t.mu.Lock()
	reason, endErr := t.endReason, t.endErr
	t.mu.Unlock()
	if endErr != nil {
		r.log.Debug("tunnel ended", "agent_id", agentID, "err", endErr)
		if _, ok := status.FromError(endErr); !ok {
			return reason, status.Error(codes.Unavailable, fmt.Sprintf("tunnel ended: %v", endErr))
		}
	}
	return reason, endErr
}
