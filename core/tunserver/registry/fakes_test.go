package registry

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Fakes shared by this package's tests. None of them touches the network.

// waitBound bounds every wait of a test.
const waitBound = 10 * time.Second

// silentCaller is a caller's stream that sends nothing: RecvMsg waits for the call's end and then fails
// as gRPC's does. The methods a pump must not use are those of the nil embedded interface: they panic.
type silentCaller struct {
	grpc.ServerStream
	ctx context.Context
}

func (s silentCaller) Context() context.Context { return s.ctx }

func (s silentCaller) RecvMsg(any) error {
	<-s.ctx.Done()
	return status.FromContextError(s.ctx.Err()).Err()
}
