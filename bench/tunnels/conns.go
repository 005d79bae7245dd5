package tunnels

import (
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

// routeConns is what a tunnel whose callers dial each agent's own listener keeps (direct, grpc-proxy):
// the listeners' routes in agent order, and the callers' connections to them.
type routeConns struct {
	mu     sync.Mutex
	routes []topology.Route
	conns  connSet
}

// add records the route of the next agent.
func (r *routeConns) add(route topology.Route) {
	r.mu.Lock()
	r.routes = append(r.routes, route)
	r.mu.Unlock()
}

// conn returns agent id's connection, made with dial from its route the first time.
func (r *routeConns) conn(id int64, dial func(topology.Route) (*grpc.ClientConn, error)) (grpc.ClientConnInterface, error) {
	r.mu.Lock()
	connected := int64(len(r.routes)) >= id
	var route topology.Route
	if connected {
		route = r.routes[id-1]
	}
	r.mu.Unlock()
	if !connected {
		return nil, fmt.Errorf("agent %d is not connected", id)
	}
	return r.conns.get(id, func() (*grpc.ClientConn, error) { return dial(route) })
}
