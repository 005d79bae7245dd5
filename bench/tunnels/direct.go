package tunnels

import (
	"context"
	"sync"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/bench/topology"
)

// Direct is the baseline: no tunnel; each agent is a gRPC server of its own on loopback, and callers
// dial it. It is also the smallest complete adapter, a model for your own.
const Direct = "direct"

func init() {
	Register(Registration{Name: Direct, Kind: KindBaseline, About: "direct gRPC over loopback TCP, no tunnel", Adapter: StartFunc(startDirect)})
}

type direct struct {
	cfg     Config
	servers loopbackServers
}

func startDirect(_ context.Context, cfg Config) (Tunnel, error) { return &direct{cfg: cfg}, nil }

func (d *direct) ConnectAgents(ctx context.Context) error {
	for id := range int64(d.cfg.Agents) {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := grpc.NewServer(grpc.MaxRecvMsgSize(d.cfg.MaxMessageSize), grpc.MaxSendMsgSize(d.cfg.MaxMessageSize))
		d.cfg.RegisterServices(id+1, s)
		if err := d.servers.serve(s); err != nil {
			return err
		}
	}
	return nil
}

func (d *direct) Conn(id int64) (grpc.ClientConnInterface, error) {
	if err := d.cfg.CheckAgent(id); err != nil {
		return nil, err
	}
	return d.servers.conn(id, func(route topology.Route) (*grpc.ClientConn, error) {
		return topology.Dial(d.cfg.agentRoute(id, route), topology.MaxMessageSize(d.cfg.MaxMessageSize))
	})
}

func (d *direct) Close(ctx context.Context) error {
	d.servers.close(ctx)
	return nil
}

// stopAll stops servers gracefully within ctx, then at once.
func stopAll(ctx context.Context, servers []*grpc.Server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { gracefulStop(ctx, s) })
	}
	wg.Wait()
}

// gracefulStop lets s's calls in flight finish within ctx, then stops it at once.
func gracefulStop(ctx context.Context, s *grpc.Server) {
	done := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.Stop()
		<-done
	}
}
