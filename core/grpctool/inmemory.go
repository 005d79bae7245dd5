package grpctool

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// DefaultInMemoryBufferSize is the size of each direction's buffer of an in-memory connection. Large
// enough that a 1 MiB message does not stall on the pipe, small enough that thousands of agents fit.
const DefaultInMemoryBufferSize = 256 * 1024

// InMemoryListener is a net.Listener whose connections never leave the process. It is how kas reaches
// its own private API and how an agent reaches its own services.
type InMemoryListener struct {
	*bufconn.Listener
}

// NewInMemoryListener returns a listener with DefaultInMemoryBufferSize buffers.
func NewInMemoryListener() *InMemoryListener {
	return &InMemoryListener{Listener: bufconn.Listen(DefaultInMemoryBufferSize)}
}

// DialInMemory returns a client connection to the server that serves l. The caller closes it.
func DialInMemory(l *InMemoryListener, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	all := append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return l.DialContext(ctx)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	// "passthrough" skips name resolution: there is no name to resolve.
	return grpc.NewClient("passthrough:in-memory", all...)
}
