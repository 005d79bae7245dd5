package tunnels

import (
	"errors"
	"sync"

	"google.golang.org/grpc"
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
