package tunnels

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jhump/grpctunnel"
	"github.com/jhump/grpctunnel/tunnelpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/internal/poll"
)

// JhumpGrpctunnel is github.com/jhump/grpctunnel: gRPC over gRPC, every call multiplexed on one
// stream. As its README's reverse tunnels have it, each agent registers its services on a
// ReverseTunnelServer and opens a reverse tunnel with Serve; the server's TunnelServiceHandler groups
// tunnels by an affinity key (here the agent id its tunnel sent as request metadata), and the caller
// uses KeyAsChannel(id) as its connection.
//
// The module proxy serves v0.3.0 (its @latest) but refuses its version list (403 "This module
// version is not available"), so `go list -m -versions` fails while `go get @v0.3.0` works.
const JhumpGrpctunnel = "jhump-grpctunnel"

// jhumpAgentKey is the request metadata of a reverse tunnel that names its agent.
const jhumpAgentKey = "tunnelbench-agent-id"

// jhumpRetry is how long an agent waits before it opens its tunnel again after it broke.
const jhumpRetry = time.Second

func init() {
	Register(Registration{Name: JhumpGrpctunnel, Kind: KindPeer, About: "github.com/jhump/grpctunnel v0.3.0: gRPC multiplexed over a gRPC stream",
		Adapter: StartFunc(startJhump)})
}

type jhump struct {
	cfg     Config
	handler *grpctunnel.TunnelServiceHandler
	server  *grpc.Server
	route   topology.Route
	wg      sync.WaitGroup
	// agentsLife ends the agents' tunnels at Close.
	agentsLife context.Context
	stopAgents context.CancelFunc
	agentsWG   sync.WaitGroup

	mu     sync.Mutex
	agents []*jhumpAgent
}

type jhumpAgent struct {
	conn   *grpc.ClientConn
	server *grpctunnel.ReverseTunnelServer
}

func startJhump(_ context.Context, cfg Config) (Tunnel, error) {
	j := &jhump{cfg: cfg}
	j.handler = grpctunnel.NewTunnelServiceHandler(grpctunnel.TunnelServiceHandlerOptions{
		AffinityKey: func(ch grpctunnel.TunnelChannel) any {
			md, _ := metadata.FromIncomingContext(ch.Context())
			if v := md.Get(jhumpAgentKey); len(v) == 1 {
				return v[0]
			}
			return nil
		},
	})
	l, route, err := topology.TCP.Listen(topology.Hop{Kind: topology.AgentKas})
	if err != nil {
		return nil, err
	}
	j.route = route
	j.server = grpc.NewServer(grpc.MaxRecvMsgSize(cfg.MaxMessageSize), grpc.MaxSendMsgSize(cfg.MaxMessageSize))
	tunnelpb.RegisterTunnelServiceServer(j.server, j.handler.Service())
	j.wg.Go(func() { _ = j.server.Serve(l) })
	j.agentsLife, j.stopAgents = context.WithCancel(context.Background())
	return j, nil
}

func jhumpKey(id int64) string { return strconv.FormatInt(id, 10) }

func (j *jhump) ConnectAgents(ctx context.Context) error {
	for id := int64(1); id <= int64(j.cfg.Agents); id++ {
		if err := j.startAgent(id); err != nil {
			return err
		}
	}
	return poll.Until(ctx, DefaultConnectTimeout, connectPoll, func() bool {
		for id := int64(1); id <= int64(j.cfg.Agents); id++ {
			if !j.handler.KeyAsChannel(jhumpKey(id)).Ready() {
				return false
			}
		}
		return true
	})
}

// startAgent connects agent id and keeps its reverse tunnel open (again after it breaks) until Close.
func (j *jhump) startAgent(id int64) error {
	conn, err := topology.Dial(j.cfg.agentRoute(id, j.route), topology.MaxMessageSize(j.cfg.MaxMessageSize))
	if err != nil {
		return err
	}
	a := &jhumpAgent{conn: conn, server: grpctunnel.NewReverseTunnelServer(tunnelpb.NewTunnelServiceClient(conn))}
	j.cfg.RegisterServices(id, a.server)
	j.mu.Lock()
	j.agents = append(j.agents, a)
	j.mu.Unlock()
	ctx := metadata.AppendToOutgoingContext(j.agentsLife, jhumpAgentKey, jhumpKey(id))
	j.agentsWG.Go(func() {
		for ctx.Err() == nil {
			if _, err := a.server.Serve(ctx); err == nil {
				continue // the server hung up: open the tunnel again
			}
			select {
			case <-ctx.Done():
			case <-time.After(jhumpRetry):
			}
		}
	})
	return nil
}

func (j *jhump) Conn(id int64) (grpc.ClientConnInterface, error) {
	if err := j.cfg.CheckAgent(id); err != nil {
		return nil, err
	}
	return j.handler.KeyAsChannel(jhumpKey(id)), nil
}

func (j *jhump) Close(ctx context.Context) error {
	j.handler.InitiateShutdown()
	j.stopAgents()
	j.mu.Lock()
	agents := j.agents
	j.mu.Unlock()
	for _, a := range agents {
		a.server.Stop()
	}
	j.agentsWG.Wait()
	for _, a := range agents {
		_ = a.conn.Close()
	}
	gracefulStop(ctx, j.server)
	j.wg.Wait()
	return nil
}
