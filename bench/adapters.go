package bench

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/bench/tunnels"
)

// adapterSet holds the tunnels a run measures through bench/tunnels adapters, each with one agent,
// which every case of that tunnel calls, as the tunnel path calls the topology's agent 1.
type adapterSet struct {
	cfg      tunnels.Config
	running  map[string]*tunnels.Running
	restarts map[string]int
}

// startAdapters starts each named adapter with its agent connected.
func startAdapters(ctx context.Context, names []string, maxMessageSize int) (*adapterSet, error) {
	s := &adapterSet{cfg: tunnels.Config{Agents: 1, MaxMessageSize: maxMessageSize},
		running: map[string]*tunnels.Running{}, restarts: map[string]int{}}
	for _, name := range names {
		r, err := tunnels.Start(ctx, name, s.cfg)
		if err != nil {
			s.close()
			return nil, err
		}
		s.running[name] = r
	}
	return s, nil
}

// conn is how callers reach the agent of the adapter name.
func (s *adapterSet) conn(name string) (grpc.ClientConnInterface, error) {
	r, ok := s.running[name]
	if !ok {
		return nil, fmt.Errorf("tunnel %s is not running", name)
	}
	return r.Conn(1)
}

// restart closes the adapter name (after a stall: its connections may never move again) and starts it
// anew, so that its next case measures a working tunnel.
func (s *adapterSet) restart(ctx context.Context, name string) error {
	if r, ok := s.running[name]; ok {
		delete(s.running, name)
		closeRunning(r)
	}
	r, err := tunnels.Start(ctx, name, s.cfg)
	if err != nil {
		return err
	}
	s.running[name] = r
	s.restarts[name]++
	return nil
}

// recordRestarts notes in infos how often each tunnel was restarted.
func (s *adapterSet) recordRestarts(infos []TunnelInfo) {
	for i := range infos {
		infos[i].Restarts = s.restarts[infos[i].Name]
	}
}

// close closes every adapter, each within tunnels.DefaultCloseTimeout.
func (s *adapterSet) close() {
	for name, r := range s.running {
		closeRunning(r)
		delete(s.running, name)
	}
}

func closeRunning(r *tunnels.Running) {
	ctx, cancel := context.WithTimeout(context.Background(), tunnels.DefaultCloseTimeout)
	defer cancel()
	// An adapter that cannot close cleanly (a stalled peer) has nothing left to measure: the run goes on.
	_ = r.Close(ctx)
}
