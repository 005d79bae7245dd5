package rpc

import (
	"io"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// EndingConnectClient is the agent's end of a tunnel whose agent set Descriptor.ends_on_request: when kas
// sends EndTunnel it cancels the stream and from then on looks exactly like a stream that kas ended with
// EndTunnel's status and reason, so that the agent's code knows one way for a tunnel to end. Only one
// goroutine may call Recv; Trailer is safe to call once Recv returned an error, as gRPC's.
type EndingConnectClient struct {
	ReverseTunnel_ConnectClient
	// Cancel cancels the stream's context: it ends the stream at once, which ends kas's read of it.
	Cancel func()

	ended  bool
	err    error
	reason string
}

// Recv returns the next message, or the end kas asked for.
func (c *EndingConnectClient) Recv() (*ConnectResponse, error) {
	m, _, err := c.RecvPooled()
	return m, err
}

// RecvPooled is Recv with a large lone payload pooled when the stream it wraps can (see
// PooledResponseReceiver).
func (c *EndingConnectClient) RecvPooled() (*ConnectResponse, *[]byte, error) {
	if c.ended {
		return nil, nil, c.err
	}
	m, pooled, err := RecvResponsePooled(c.ReverseTunnel_ConnectClient)
	if err != nil {
		return m, nil, err
	}
	end, ok := m.GetMsg().(*ConnectResponse_EndTunnel)
	if !ok {
		return m, pooled, nil
	}
	c.ended = true
	c.reason = end.EndTunnel.GetReason()
	c.err = io.EOF
	if st := end.EndTunnel.GetStatus(); st != nil && st.GetCode() != 0 {
		c.err = status.FromProto(st).Err()
	}
	c.Cancel()
	return nil, nil, c.err
}

// Trailer is kas's trailer, or for a tunnel ended by EndTunnel the one kas would have sent with it.
func (c *EndingConnectClient) Trailer() metadata.MD {
	if !c.ended {
		return c.ReverseTunnel_ConnectClient.Trailer()
	}
	if c.reason == "" {
		return metadata.MD{}
	}
	return metadata.Pairs(TunnelEndReasonKey, c.reason)
}

// EndTunnelMessage is the EndTunnel that ends a tunnel with err (nil: cleanly) and reason.
func EndTunnelMessage(reason string, err error) *ConnectResponse {
	end := &EndTunnel{Reason: reason}
	if err != nil {
		end.Status = status.Convert(err).Proto()
	}
	return &ConnectResponse{Msg: &ConnectResponse_EndTunnel{EndTunnel: end}}
}
