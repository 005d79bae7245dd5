package rpc

import "google.golang.org/grpc"

// Awaiter is a stream that can wait until it has something to receive (a message, its end, an error)
// without receiving it: a goroutine that waits there rather than deep in Recv waits on a shallow stack,
// which the runtime can shrink while it waits (an idle tunnel's goroutine, one per agent, waits so).
type Awaiter interface {
	AwaitReceived()
}

// AwaitReceived waits until s has something to receive, when s (or the stream it wraps) can tell;
// otherwise it returns at once and Recv does the waiting.
func AwaitReceived(s ReverseTunnel_ConnectClient) {
	if a, ok := s.(Awaiter); ok {
		a.AwaitReceived()
		return
	}
	if g, ok := s.(*grpc.GenericClientStream[ConnectRequest, ConnectResponse]); ok {
		if a, ok := g.ClientStream.(Awaiter); ok {
			a.AwaitReceived()
		}
	}
}

// AwaitReceived returns at once while a batch has messages left, and waits on the stream otherwise.
func (c *BatchedConnectClient) AwaitReceived() {
	if len(c.in.pending) == 0 {
		AwaitReceived(c.ReverseTunnel_ConnectClient)
	}
}

// AwaitReceived returns at once once kas ended the tunnel, and waits on the stream otherwise.
func (c *EndingConnectClient) AwaitReceived() {
	if !c.ended {
		AwaitReceived(c.ReverseTunnel_ConnectClient)
	}
}
