package tunclient

import (
	"context"
	"time"

	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// tunnelCall is how one call ends on its tunnel: on a single-use tunnel the agent half-closes and kas
// ends the stream; on a reusable one each side sends call_end, and the tunnel takes its next call once
// both did.
type tunnelCall struct {
	stream       rpc.ReverseTunnel_ConnectClient
	cancelStream context.CancelFunc
	reuse        bool
	// batches: kas took the agent's offer of batches; the tunnel is reusable.
	batches bool
	// drain bounds every wait for kas's end of the call (Config.DrainTimeout).
	drain time.Duration
}

// agentCallEnd is the agent's call_end, built once.
var agentCallEnd = &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_CallEnd{CallEnd: &rpc.CallEnd{}}}

// endOurs says the agent sends nothing more for the call.
func (c tunnelCall) endOurs() error {
	if c.reuse {
		return c.stream.Send(agentCallEnd)
	}
	return c.stream.CloseSend()
}

// endOursWith ends the call through b: the agent's call_end joins the answer b holds, and what b holds
// leaves as one batch. Batches exist on reusable tunnels only.
func (c tunnelCall) endOursWith(b *rpc.RequestBatcher) error {
	if err := b.Send(agentCallEnd); err != nil {
		return err
	}
	return b.Flush()
}

// table is what kas may send during the call.
func (c tunnelCall) table() *rpc.Table {
	if c.reuse {
		return rpc.KasToAgentReuse
	}
	return rpc.KasToAgent
}

// kasSide reads kas's side of the call until its end: call_end on a reusable tunnel (ended reports it,
// with kas's reason when it ended the call early), the end of the stream otherwise. onMsg gets every
// request frame and close_send, and owns a frame's pooled buffer (see rpc.PooledResponseReceiver).
func (c tunnelCall) kasSide(onMsg func(m *rpc.ConnectResponse, pooled *[]byte), warn func(err error)) (ended bool, why error) {
	checker := rpc.NewChecker(c.table())
	_ = checker.Next(rpc.StateRequestInfo)
	for {
		m, pooled, err := rpc.RecvResponsePooled(c.stream)
		if err != nil {
			return false, nil
		}
		if err := checker.Next(rpc.KasState(m)); err != nil {
			warn(err)
			c.cancelStream()
			return false, nil
		}
		if e := m.GetCallEnd(); e != nil {
			if st := e.GetStatus(); st != nil {
				why = status.ErrorProto(st)
			}
			return true, why
		}
		onMsg(m, pooled)
	}
}

// drainUntilEnd reads what kas still sends for a call the agent ended early, until kas's call_end (or
// the end of the stream), at most the drain timeout; it reports whether the tunnel can take another call.
func (c tunnelCall) drainUntilEnd() bool {
	timer := time.AfterFunc(c.drain, c.cancelStream)
	defer timer.Stop()
	ended, _ := c.kasSide(func(*rpc.ConnectResponse, *[]byte) {}, func(error) {})
	return c.reuse && ended
}
