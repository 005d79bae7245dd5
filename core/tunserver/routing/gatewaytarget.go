package routing

import (
	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
	"google.golang.org/grpc"
)

// gatewayTarget sends the request to a gateway kas that was sent StartStreaming.
type gatewayTarget struct {
	cs grpc.ClientStream
}

func (gt *gatewayTarget) Begin() error { return nil }

func (gt *gatewayTarget) Send(f request.Frame) error {
	if f.End {
		return gt.cs.CloseSend()
	}
	// A pooled frame's buffer goes with it: the write takes a reference of its own (see request.Frame).
	return gt.cs.SendMsg(&grpctool.RawFrame{Data: f.Data, Shared: f.Buf})
}
