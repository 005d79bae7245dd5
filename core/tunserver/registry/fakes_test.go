package registry

import (
	"context"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
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

// scriptedCaller sends frames, then half-closes; after that it waits for its context's end.
type scriptedCaller struct {
	grpc.ServerStream
	ctx    context.Context
	frames [][]byte
}

func (s *scriptedCaller) Context() context.Context { return s.ctx }

func (s *scriptedCaller) RecvMsg(m any) error {
	if len(s.frames) > 0 {
		m.(*grpctool.RawFrame).Data = s.frames[0]
		s.frames = s.frames[1:]
		return nil
	}
	if s.frames != nil {
		s.frames = nil
		return io.EOF
	}
	<-s.ctx.Done()
	return status.FromContextError(s.ctx.Err()).Err()
}
