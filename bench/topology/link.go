package topology

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// HopKind is a kind of link in a topology: who dials which listener. The names are chaos's link names.
type HopKind string

// Hop kinds.
const (
	// CallerKas: callers to a kas's public API.
	CallerKas HopKind = "caller->kas"
	// AgentKas: agents to a kas's agent API.
	AgentKas HopKind = "agent->kas"
	// KasKas: every other kas to a kas's private API.
	KasKas HopKind = "kas->kas"
	// KasRedis: a kas to the Redis of its tracker.
	KasRedis HopKind = "kas->redis"
	// CallerDirect: callers to a service served without kas (bench's baseline).
	CallerDirect HopKind = "caller->direct"
)

// Hop is one link: its kind, the kas at the kas end (the listening kas; for KasRedis, the dialing
// one), and for AgentKas the agent that dials (zero when the listener is opened for every agent).
type Hop struct {
	Kind  HopKind
	Kas   int
	Agent int64
}

// Route is how a peer reaches a listener: a gRPC target, and for a listener that is not on TCP (in
// memory) the dialer that reaches it.
type Route struct {
	Target string
	Dial   func(ctx context.Context, addr string) (net.Conn, error)
}

// DialOptions are the options that make a gRPC connection to Target take this route.
func (r Route) DialOptions() []grpc.DialOption {
	if r.Dial == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithContextDialer(r.Dial)}
}

// Dial connects a plaintext gRPC client to r; opts come last, so they win.
func Dial(r Route, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	all := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, r.DialOptions()...)
	return grpc.NewClient(r.Target, append(all, opts...)...)
}

// MaxMessageSize is the dial option for a caller that sends and receives messages up to n bytes.
func MaxMessageSize(n int) grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(n), grpc.MaxCallSendMsgSize(n))
}

// Link is how peers reach a topology's listeners. TCP and InMemory are the plain links; a caller wraps
// one to put something on each hop (chaos puts a toxiproxy proxy there) by embedding it.
type Link interface {
	// Listen opens the listener at the far end of h and returns it with the route that reaches it
	// directly.
	Listen(h Hop) (net.Listener, Route, error)
	// Route is how the near end of h reaches a listener whose direct route is direct; plain links
	// return direct.
	Route(h Hop, direct Route) (Route, error)
}

// TCP is loopback TCP for every hop.
var TCP Link = tcpLink{}

// InMemory puts callers and agents on in-memory listeners (bufconn, no system calls); kas reaches
// other kas over loopback TCP, since it dials them by URL.
var InMemory Link = inMemoryLink{}

type tcpLink struct{}

func (tcpLink) Listen(Hop) (net.Listener, Route, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, Route{}, err
	}
	return l, Route{Target: l.Addr().String()}, nil
}

func (tcpLink) Route(_ Hop, direct Route) (Route, error) { return direct, nil }

type inMemoryLink struct{}

func (inMemoryLink) Listen(h Hop) (net.Listener, Route, error) {
	if h.Kind == KasKas {
		return TCP.Listen(h)
	}
	l := grpctool.NewInMemoryListener()
	return l, Route{Target: "passthrough:in-memory", Dial: func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }}, nil
}

func (inMemoryLink) Route(_ Hop, direct Route) (Route, error) { return direct, nil }
