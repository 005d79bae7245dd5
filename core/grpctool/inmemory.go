package grpctool

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// Flow-control windows of tunnel connections. Fixed windows turn off gRPC's bandwidth-delay probing,
// which costs a PING and its ACK on a connection for nearly every burst of data: on the few-microsecond
// links a tunnel uses, that doubles the frames per call. The stream window is large enough for 1 MiB
// messages to stream without waiting for window updates; the connection window bounds what one peer can
// make the other buffer.
const (
	StreamWindow     = 4 << 20
	ConnectionWindow = 16 << 20
)

// WindowServerOptions are the server options for fixed tunnel windows.
func WindowServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(StreamWindow), grpc.InitialConnWindowSize(ConnectionWindow)}
}

// WindowDialOptions are the dial options for fixed tunnel windows.
func WindowDialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(StreamWindow), grpc.WithInitialConnWindowSize(ConnectionWindow)}
}

// DefaultInMemoryBufferSize is the size of each direction's buffer of an in-memory connection. Large
// enough that a 1 MiB message does not stall on the pipe, small enough that thousands of agents fit.
const DefaultInMemoryBufferSize = 256 * 1024

// InMemoryListener is a net.Listener whose connections never leave the process: the in-memory link of
// tests and of the benchmark's bufconn transport, and what an agent with Config.BufconnServer (the seed
// design's grpc.Server behind bufconn) serves on. kas's own in-process callers use InProcessConn, and
// an agent serves its services straight from the tunnel by default.
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
		// Nothing is retried in memory; retry support would buffer every message for nothing.
		grpc.WithDisableRetry(),
		grpc.WithSharedWriteBuffer(true),
	}, opts...)
	all = append(all, WindowDialOptions()...)
	// "passthrough" skips name resolution: there is no name to resolve.
	return grpc.NewClient("passthrough:in-memory", all...)
}
