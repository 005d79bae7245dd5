package tunserver

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// FindRequest describes the call a gateway is wanted for.
type FindRequest struct {
	AgentID         int64
	FullMethod      string
	Service, Method string
	// Metadata is the caller's; a remote gateway gets it without reserved keys and credentials (see
	// toGateway).
	Metadata    metadata.MD
	FindTimeout time.Duration
}

// Gateway is where a call goes: a tunnel of this kas, or the private API stream to another kas that
// holds one (already sent StartStreaming). Exactly one of the two is set.
type Gateway struct {
	handle *FindHandle
	tunnel *Tunnel
	stream grpc.ClientStream
}

// GatewayFinder finds the gateway for a call: this kas first, other kas instances when it has none.
// A remote stream lives as long as ctx. When no gateway has a tunnel within FindTimeout it returns a
// *findTimeoutError.
type GatewayFinder interface {
	FindGateway(ctx context.Context, req FindRequest) (Gateway, error)
}

type findTimeoutError struct {
	timeout time.Duration
}

func (e *findTimeoutError) Error() string {
	return fmt.Sprintf("no tunnel found within %s", e.timeout)
}

// LocalFinder is the finder of a kas that is its own only gateway: it waits for a tunnel in its own
// registry.
type LocalFinder struct {
	Registry *Registry
}

// FindGateway implements GatewayFinder.
func (f LocalFinder) FindGateway(ctx context.Context, req FindRequest) (Gateway, error) {
	found, h := f.Registry.FindTunnel(req.AgentID, req.Service, req.Method)
	if found {
		t, _ := h.Get(ctx) // never blocks when found
		return Gateway{handle: h, tunnel: t}, nil
	}
	findCtx, cancel := context.WithTimeout(ctx, req.FindTimeout)
	defer cancel()
	t, err := h.Get(findCtx)
	if err != nil {
		h.Done()
		if ctx.Err() == nil && findCtx.Err() != nil {
			return Gateway{}, &findTimeoutError{timeout: req.FindTimeout}
		}
		return Gateway{}, err
	}
	return Gateway{handle: h, tunnel: t}, nil
}

// attemptGateway opens the private API stream to one gateway and waits until it has a tunnel ready or
// the find timeout passes; then it sends StartStreaming.
func attemptGateway(ctx context.Context, conn grpc.ClientConnInterface, req FindRequest) (grpc.ClientStream, error) {
	streamCtx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, toGateway(req.Metadata)))
	// The stream outlives the find: it carries the call afterwards. The timer cancels it only if no
	// tunnel was ready in time.
	timer := time.AfterFunc(req.FindTimeout, cancel)
	stream, err := conn.NewStream(streamCtx, grpctool.BidiStreamDesc, req.FullMethod, grpctool.RawCallCodec())
	if err != nil {
		timer.Stop()
		cancel()
		return nil, err
	}
	checker := rpc.NewChecker(rpc.GatewayToRouting)
	for {
		var m rpc.GatewayResponse
		err := stream.RecvMsg(&m)
		if err != nil {
			stopped := timer.Stop()
			cancel()
			if !stopped && ctx.Err() == nil {
				return nil, &findTimeoutError{timeout: req.FindTimeout}
			}
			if err == io.EOF {
				return nil, status.Error(codes.Unavailable, "gateway kas ended the stream before it had a tunnel")
			}
			return nil, err
		}
		if err := checker.Next(rpc.GatewayState(&m)); err != nil {
			timer.Stop()
			cancel()
			return nil, status.Errorf(codes.Unavailable, "gateway kas broke the protocol: %v", status.Convert(err).Message())
		}
		if checker.State() != rpc.StateTunnelReady {
			continue // no_tunnel: the gateway keeps looking
		}
		if !timer.Stop() {
			cancel()
			return nil, &findTimeoutError{timeout: req.FindTimeout}
		}
		if err := stream.SendMsg(&rpc.StartStreaming{}); err != nil {
			cancel()
			return nil, err
		}
		return stream, nil
	}
}
