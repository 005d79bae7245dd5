package tunclient

import (
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// DefaultKeepaliveTime is how long a quiet connection to kas waits before the agent pings it, so that a
// kas that vanished without closing the connection (a black hole) is noticed.
const DefaultKeepaliveTime = 20 * time.Second

// DialKas returns a connection to kas's agent API that sends token with every call. Without transport
// credentials in opts the connection is plaintext, for loopback development only.
func DialKas(target, token string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if token == "" {
		return nil, fmt.Errorf("dial kas %s: empty agent token", target)
	}
	all := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(TokenCredentials{Token: token, AllowInsecure: true}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                DefaultKeepaliveTime,
			Timeout:             10 * time.Second,
			PermitWithoutStream: true,
		}),
		// A tunnel is never retried by gRPC: the pool reconnects, and kas moves a call that a withdrawn
		// tunnel could not take. Retry support would buffer every message for nothing.
		grpc.WithDisableRetry(),
		// Idle agents hold no write buffer.
		grpc.WithSharedWriteBuffer(true),
	}
	all = append(all, grpctool.WindowDialOptions()...)
	all = append(all, opts...)
	conn, err := grpc.NewClient(target, all...)
	if err != nil {
		return nil, fmt.Errorf("dial kas %s: %w", target, err)
	}
	return conn, nil
}
