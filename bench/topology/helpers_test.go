package topology

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/demo"
)

// forwardLink is TCP with a forwarder on every hop, as chaos puts a proxy there: it records the hops it
// was asked for and counts the connections each forwarder carried.
type forwardLink struct {
	t     *testing.T
	mu    sync.Mutex
	hops  map[Hop]*forwarder
	order []Hop
}

func newForwardLink(t *testing.T) *forwardLink { return &forwardLink{t: t, hops: map[Hop]*forwarder{}} }

func (l *forwardLink) Listen(h Hop) (net.Listener, Route, error) { return TCP.Listen(h) }

func (l *forwardLink) Route(h Hop, direct Route) (Route, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.hops[h]
	if f == nil {
		var err error
		if f, err = startForwarder(direct.Target); err != nil {
			return Route{}, err
		}
		l.t.Cleanup(f.close)
		l.hops[h] = f
		l.order = append(l.order, h)
	}
	return Route{Target: f.l.Addr().String()}, nil
}

// carried is how many connections the forwarder of h carried; -1 when h has none.
func (l *forwardLink) carried(h Hop) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.hops[h]; f != nil {
		return f.conns.Load()
	}
	return -1
}

// forwarder copies every connection it accepts to upstream and back.
type forwarder struct {
	l        net.Listener
	upstream string
	conns    atomic.Int64
	mu       sync.Mutex
	open     []net.Conn
	wg       sync.WaitGroup
}

func startForwarder(upstream string) (*forwarder, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &forwarder{l: l, upstream: upstream}
	f.wg.Go(f.serve)
	return f, nil
}

func (f *forwarder) serve() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", f.upstream, time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		f.conns.Add(1)
		f.mu.Lock()
		f.open = append(f.open, c, up)
		f.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		f.wg.Go(func() { pipe(up, c) })
		f.wg.Go(func() { pipe(c, up) })
	}
}

func (f *forwarder) close() {
	_ = f.l.Close()
	f.mu.Lock()
	for _, c := range f.open {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// echo calls the demo service of agent id through conn.
func echo(ctx context.Context, conn grpc.ClientConnInterface, id int64) error {
	ctx = metadata.AppendToOutgoingContext(ctx, rpc.RoutingAgentIDMetadataKey, strconv.FormatInt(id, 10))
	resp, err := demo.NewDemoClient(conn).Echo(ctx, &demo.EchoRequest{Message: "hi"})
	if err == nil && resp.GetMessage() != "hi" {
		return fmt.Errorf("echo answered %q", resp.GetMessage())
	}
	return err
}
