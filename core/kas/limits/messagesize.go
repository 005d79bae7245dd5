package limits

import (
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
)

// MessageSizeInterceptor bounds routed messages with a status that names the flag, and counts every
// message refused for its size. gRPC checks received messages itself (and answers the caller at once with
// its own "larger than max" status), so those are only counted; sent messages are checked here first, so
// that the caller learns which limit it was.
func MessageSizeInterceptor(limit int, onLimit tunserver.OnLimit) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &sizeCheckedStream{ServerStream: ss, limit: limit, onLimit: onLimit})
	}
}

type sizeCheckedStream struct {
	grpc.ServerStream
	limit   int
	onLimit tunserver.OnLimit
}

func (s *sizeCheckedStream) SendMsg(m any) error {
	if f, ok := m.(*grpctool.RawFrame); ok && len(f.Data) > s.limit {
		s.onLimit.Hit(tunserver.LimitMessageSize)
		return status.Errorf(codes.ResourceExhausted, "the agent's response message is %d bytes, larger than the limit (--max-message-size) of %d bytes", len(f.Data), s.limit)
	}
	return s.ServerStream.SendMsg(m)
}

func (s *sizeCheckedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err != nil && status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max") {
		s.onLimit.Hit(tunserver.LimitMessageSize)
	}
	return err
}
