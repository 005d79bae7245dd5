package agentk

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// upstreamConn is the connection to a gRPC server that agentk exposes through the tunnel. Its errors name
// the upstream, so that a caller behind kas can tell an unreachable upstream from a broken tunnel.
type upstreamConn struct {
	*grpc.ClientConn
	addr string
}

// dialUpstream connects (lazily) to a plaintext gRPC server next to the agent.
func dialUpstream(addr string, maxMsg int) (*upstreamConn, error) {
	c, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
	)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", addr, err)
	}
	return &upstreamConn{ClientConn: c, addr: addr}, nil
}

// NewStream implements grpc.ClientConnInterface.
func (u *upstreamConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := u.ClientConn.NewStream(ctx, desc, method, opts...)
	if err != nil {
		return nil, u.wrap(err)
	}
	return &upstreamStream{ClientStream: cs, u: u}, nil
}

// wrap names the upstream in transport failures; the upstream's own statuses pass untouched.
func (u *upstreamConn) wrap(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || strings.Contains(st.Message(), u.addr) && strings.HasPrefix(st.Message(), "upstream ") {
		return err
	}
	if !strings.Contains(st.Message(), "connection") && !strings.Contains(st.Message(), "transport") {
		return err // an Unavailable the upstream service chose to return
	}
	return status.Errorf(codes.Unavailable, "upstream %s unreachable: %s", u.addr, st.Message())
}

type upstreamStream struct {
	grpc.ClientStream
	u *upstreamConn
}

func (s *upstreamStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return s.u.wrap(err)
	}
	return nil
}

func (s *upstreamStream) Header() (metadata.MD, error) {
	h, err := s.ClientStream.Header()
	if err != nil {
		return nil, s.u.wrap(err)
	}
	return h, nil
}
