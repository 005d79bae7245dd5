package tunnels

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/bench/topology"
)

// A tunnel added in one file, as a user would add theirs: direct gRPC over in-memory connections (no
// tunnel at all), registered by name. The suite (TestAdapters) runs it with every other adapter, and
// TestRunCase runs a case through it, so that the interface stays one a newcomer can implement.

const trivialName = "test-in-memory"

func init() {
	Register(Registration{Name: trivialName, Kind: KindPeer, About: "test: direct gRPC in memory", Adapter: StartFunc(startTrivial)})
}

type trivial struct {
	cfg     Config
	mu      sync.Mutex
	routes  []topology.Route
	servers []*grpc.Server
	wg      sync.WaitGroup
	conns   connSet
}

func startTrivial(_ context.Context, cfg Config) (Tunnel, error) { return &trivial{cfg: cfg}, nil }

func (t *trivial) ConnectAgents(context.Context) error {
	for id := int64(1); id <= int64(t.cfg.Agents); id++ {
		l, route, err := topology.InMemory.Listen(topology.Hop{Kind: topology.CallerDirect})
		if err != nil {
			return err
		}
		s := grpc.NewServer(grpc.MaxRecvMsgSize(t.cfg.MaxMessageSize), grpc.MaxSendMsgSize(t.cfg.MaxMessageSize))
		t.cfg.RegisterServices(id, s)
		t.mu.Lock()
		t.routes, t.servers = append(t.routes, route), append(t.servers, s)
		t.mu.Unlock()
		t.wg.Go(func() { _ = s.Serve(l) })
	}
	return nil
}

func (t *trivial) Conn(id int64) (grpc.ClientConnInterface, error) {
	if err := t.cfg.CheckAgent(id); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(id) > len(t.routes) {
		return nil, fmt.Errorf("agent %d is not connected", id)
	}
	route := t.routes[id-1]
	return t.conns.get(id, func() (*grpc.ClientConn, error) {
		return topology.Dial(route, topology.MaxMessageSize(t.cfg.MaxMessageSize))
	})
}

func (t *trivial) Close(ctx context.Context) error {
	t.conns.close()
	t.mu.Lock()
	servers := t.servers
	t.mu.Unlock()
	stopAll(ctx, servers)
	t.wg.Wait()
	return nil
}
