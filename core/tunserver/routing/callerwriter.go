package routing

import (
	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// callerWriter writes the agent's answer to the caller.
type callerWriter struct {
	caller grpc.ServerStream
	final  error
}

// agentMessage writes one message of the agent's answer (the sink of a local tunnel, see
// registry.Sink; each goes at once: gRPC's writer already gathers what is written together).
func (w *callerWriter) agentMessage(m *rpc.ConnectRequest, pooled *[]byte, _ bool) error {
	switch x := m.GetMsg().(type) {
	case *rpc.ConnectRequest_Header:
		return w.header(x.Header)
	case *rpc.ConnectRequest_Message:
		return w.message(x.Message, pooled)
	case *rpc.ConnectRequest_Trailer:
		w.trailer(x.Trailer)
	case *rpc.ConnectRequest_Error:
		w.final = call.AgentStatusErr(x.Error)
	}
	return nil
}

// header sends a non-empty header at once; an empty one goes with the first message, or the answer is
// trailers-only, exactly as the service's own would be.
func (w *callerWriter) header(h *rpc.Header) error {
	if md := call.FromAgent(rpc.ValuesToMeta(h.GetMeta())); len(md) > 0 {
		err := w.caller.SendHeader(md)
		if err != nil && w.caller.Context().Err() == nil {
			// The caller is still there: gRPC refused the header itself.
			return status.Errorf(codes.Internal, "the agent's response header is not valid gRPC metadata: %s", status.Convert(err).Message())
		}
		return err
	}
	return nil
}

// message sends m, and its pooled buffer with it: gRPC puts that back once written (RawCodec), an
// in-process caller once decoded. kas's servers have no stats handler, which could read a sent message
// after it was written.
func (w *callerWriter) message(m *rpc.Message, pooled *[]byte) error {
	return w.caller.SendMsg(&grpctool.RawFrame{Data: m.GetData(), Pooled: pooled})
}

func (w *callerWriter) trailer(t *rpc.Trailer) {
	w.caller.SetTrailer(call.FromAgent(rpc.ValuesToMeta(t.GetMeta())))
}
