package routing

import (
	"context"
	"io"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// forwardRemote carries the call through a gateway kas that has a tunnel ready: the request through the
// pump, the gateway's messages to the caller. It returns registry.ErrRetryOtherTunnel when the gateway lost its
// tunnel before the agent accepted the call and the request can be replayed.
func forwardRemote(ctx context.Context, w *callerWriter, gw grpc.ClientStream, pump *request.Pump) error {
	// A failed attach means the stream is over: its status comes from RecvMsg.
	_ = pump.Attach(&gatewayTarget{cs: gw})
	defer pump.Detach()
	checker := rpc.NewChecker(rpc.GatewayToRouting)
	_ = checker.Next(rpc.StateTunnelReady)
	return relayGateway(ctx, w, &rpc.GatewayReceiver{Stream: gw}, pump, checker)
}

// relayGateway passes the gateway's answer to the caller, from tunnel_ready on (checker's state).
func relayGateway(ctx context.Context, w *callerWriter, in *rpc.GatewayReceiver, pump *request.Pump, checker rpc.Checker) error {
	gw := in.Stream
	accepted := false
	for {
		m, pooled, err := in.RecvPooled()
		if err == io.EOF {
			if err := checker.Next(rpc.StateEOF); err != nil {
				return status.Errorf(codes.Unavailable, "gateway kas ended the call without an answer: %v", status.Convert(err).Message())
			}
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			if !accepted && len(gw.Trailer().Get(rpc.GatewayRetryTrailerKey)) > 0 {
				if pump.Detach() {
					return registry.ErrRetryOtherTunnel
				}
				return status.Error(codes.Unavailable, "the agent's tunnel went away as the call arrived and the request was too large to replay")
			}
			return err // the gateway's status, or the transport's
		}
		st := rpc.GatewayState(m)
		if err := checker.Next(st); err != nil {
			return status.Errorf(codes.Unavailable, "gateway kas broke the protocol: %v", status.Convert(err).Message())
		}
		if !accepted {
			accepted = true
			pump.Accept()
		}
		switch x := m.GetMsg().(type) {
		case *rpc.GatewayResponse_Header:
			if err := w.header(x.Header); err != nil {
				return err
			}
		case *rpc.GatewayResponse_Message:
			if err := w.message(x.Message, pooled); err != nil {
				return err
			}
		case *rpc.GatewayResponse_Trailer:
			w.trailer(x.Trailer)
		case *rpc.GatewayResponse_Error:
			w.final = call.AgentStatusErr(x.Error)
		}
	}
}
