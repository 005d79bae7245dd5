package tunnels

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/bench/topology"
)

// errClosed is what a closed tunnel answers.
var errClosed = errors.New("tunnel is closed")

// connSet holds the callers' connections of a tunnel whose callers need one gRPC connection per
// agent (the tunnels that carry TCP): dialed on first use, shared afterwards, closed together.
type connSet struct {
	mu     sync.Mutex
	conns  map[int64]*grpc.ClientConn
	closed bool
}

// get returns agent id's connection, dialing it with dial the first time.
func (s *connSet) get(id int64, dial func() (*grpc.ClientConn, error)) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if c, ok := s.conns[id]; ok {
		return c, nil
	}
	c, err := dial()
	if err != nil {
		return nil, err
	}
	if s.conns == nil {
		s.conns = map[int64]*grpc.ClientConn{}
	}
	s.conns[id] = c
	return c, nil
}

// close closes every connection; get fails afterwards.
func (s *connSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}

// loopbackServers is what a tunnel whose every agent is a gRPC server of its own on loopback keeps
// (direct, grpc-proxy): the servers, their routes in agent order, and the callers' connections to them.
type loopbackServers struct {
	mu      sync.Mutex
	servers []*grpc.Server
	routes  []topology.Route
	wg      sync.WaitGroup
	conns   connSet
}

// serve serves s on a new loopback listener, as the next agent's server; s is stopped if it cannot be.
func (l *loopbackServers) serve(s *grpc.Server) error {
	lis, route, err := topology.TCP.Listen(topology.Hop{Kind: topology.CallerDirect})
	if err != nil {
		s.Stop()
		return err
	}
	l.mu.Lock()
	l.servers, l.routes = append(l.servers, s), append(l.routes, route)
	l.mu.Unlock()
	l.wg.Go(func() { _ = s.Serve(lis) })
	return nil
}

// conn returns agent id's connection, made with dial from its server's route the first time.
func (l *loopbackServers) conn(id int64, dial func(topology.Route) (*grpc.ClientConn, error)) (grpc.ClientConnInterface, error) {
	l.mu.Lock()
	connected := int64(len(l.routes)) >= id
	var route topology.Route
	if connected {
		route = l.routes[id-1]
	}
	l.mu.Unlock()
	if !connected {
		return nil, fmt.Errorf("agent %d is not connected", id)
	}
	return l.conns.get(id, func() (*grpc.ClientConn, error) { return dial(route) })
}

// close closes the callers' connections, then stops the servers, gracefully within ctx.
func (l *loopbackServers) close(ctx context.Context) {
	l.conns.close()
	l.mu.Lock()
	servers := l.servers
	l.servers = nil
	l.mu.Unlock()
	stopAll(ctx, servers)
	l.wg.Wait()
}
