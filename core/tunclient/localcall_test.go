package tunclient

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// fakeTunnel is the agent's end of a tunnel stream, driven by a test: Recv returns what the test queues,
// Send records.
type fakeTunnel struct {
	grpc.ClientStream
	ctx  context.Context
	in   chan *rpc.ConnectResponse
	mu   sync.Mutex
	sent []*rpc.ConnectRequest
}

func (f *fakeTunnel) Send(m *rpc.ConnectRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, m)
	return nil
}

func (f *fakeTunnel) Recv() (*rpc.ConnectResponse, error) {
	select {
	case m, ok := <-f.in:
		if !ok {
			return nil, io.EOF
		}
		return m, nil
	case <-f.ctx.Done():
		return nil, status.FromContextError(f.ctx.Err()).Err()
	}
}

func (f *fakeTunnel) CloseSend() error { return nil }

func TestServeLocalStopsWaitingForAServiceThatIgnoresTheEnd(t *testing.T) {

	release := make(chan struct{})
	handlerEnded := make(chan struct{})
	stubborn := &grpc.ServiceDesc{
		ServiceName: "tunnelbench.test.Stubborn",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Ignore", ClientStreams: true, ServerStreams: true,
			Handler: func(any, grpc.ServerStream) error {
				defer close(handlerEnded)
				<-release // not its context: it goes on after the call ended
				return nil
			}}},
	}
	a, err := New(Config{KasConn: &grpc.ClientConn{}})
	if err != nil {
		t.Fatal(err)
	}
	a.RegisterService(stubborn, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tun := &fakeTunnel{ctx: ctx, in: make(chan *rpc.ConnectResponse, 1)}
	close(tun.in) // kas ends the stream at once: the caller went away
	ctx2, cancelCall, md, end := a.callContext(ctx, &rpc.RequestInfo{MethodName: "/tunnelbench.test.Stubborn/Ignore"})
	defer end()
	returned := make(chan struct{})
	go func() {
		a.serveLocal(ctx2, cancelCall, md, tunnelCall{stream: tun, cancelStream: cancel, drain: 100 * time.Millisecond}, "/tunnelbench.test.Stubborn/Ignore")
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("serveLocal waited for a service that ignores its context")
	}
	close(release)
	<-handlerEnded
}
