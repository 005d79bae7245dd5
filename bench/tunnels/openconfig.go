package tunnels

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/openconfig/grpctunnel/dialer"
	tpb "github.com/openconfig/grpctunnel/proto/tunnel"
	"github.com/openconfig/grpctunnel/tunnel"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/internal/poll"
)

// OpenconfigGrpctunnel is github.com/openconfig/grpctunnel: TCP over gRPC streams. As its gNMI
// dial-out design has it, each agent registers a target with the tunnel server and serves gRPC on
// tunnel.Listen's listener; the caller, in the tunnel server's process, dials the target through
// dialer.ServerDialer (a gRPC connection whose transport is a session over the tunnel).
const OpenconfigGrpctunnel = "openconfig-grpctunnel"

// openconfigTargetType is the target type every agent registers, as gNMI dial-out registers "GNMI_GNOI".
const openconfigTargetType = "demo"

func init() {
	Register(Registration{Name: OpenconfigGrpctunnel, Kind: KindPeer, About: "github.com/openconfig/grpctunnel v0.2.0: TCP over a gRPC stream",
		Adapter: StartFunc(startOpenconfig)})
}

type openconfig struct {
	cfg    Config
	server *grpc.Server
	addr   string
	// life ends with Close: agents' tunnel clients and callers' sessions live in it.
	life   context.Context
	cancel context.CancelFunc
	dial   *dialer.ServerDialer
	wg     sync.WaitGroup
	conns  connSet

	mu         sync.Mutex
	registered map[tunnel.Target]bool
	agents     []*grpc.Server
}

func openconfigTarget(id int64) tunnel.Target {
	return tunnel.Target{ID: "agent-" + strconv.FormatInt(id, 10), Type: openconfigTargetType}
}

func startOpenconfig(_ context.Context, cfg Config) (Tunnel, error) {
	o := &openconfig{cfg: cfg, registered: map[tunnel.Target]bool{}}
	ts, err := tunnel.NewServer(tunnel.ServerConfig{AddTargetHandler: o.added, DeleteTargetHandler: o.deleted})
	if err != nil {
		return nil, err
	}
	if o.dial, err = dialer.FromServer(ts); err != nil {
		return nil, err
	}
	l, route, err := topology.TCP.Listen(topology.Hop{Kind: topology.AgentKas})
	if err != nil {
		return nil, err
	}
	o.addr = route.Target
	o.server = grpc.NewServer()
	tpb.RegisterTunnelServer(o.server, ts)
	o.life, o.cancel = context.WithCancel(context.Background())
	o.wg.Go(func() { _ = o.server.Serve(l) })
	return o, nil
}

func (o *openconfig) added(t tunnel.Target) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.registered[t] = true
	return nil
}

func (o *openconfig) deleted(t tunnel.Target) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.registered, t)
	return nil
}

func (o *openconfig) ConnectAgents(ctx context.Context) error {
	for id := int64(1); id <= int64(o.cfg.Agents); id++ {
		if err := o.startAgent(ctx, id); err != nil {
			return fmt.Errorf("agent %d: %w", id, err)
		}
	}
	return poll.Until(ctx, DefaultConnectTimeout, connectPoll, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.registered) == o.cfg.Agents
	})
}

func (o *openconfig) startAgent(ctx context.Context, id int64) error {
	// tunnel.Listen retries until it registers, for as long as its context lives, which is also the
	// agent's life: end it early if the connect bound passes first.
	actx, cancel := context.WithCancel(o.life)
	stop := context.AfterFunc(ctx, cancel)
	l, err := tunnel.Listen(actx, o.addr, "", map[tunnel.Target]struct{}{openconfigTarget(id): {}})
	interrupted := !stop()
	if err != nil || interrupted {
		cancel()
		if err == nil {
			_ = l.Close()
			err = ctx.Err()
		}
		return err
	}
	s := grpc.NewServer(grpc.MaxRecvMsgSize(o.cfg.MaxMessageSize), grpc.MaxSendMsgSize(o.cfg.MaxMessageSize))
	o.cfg.RegisterServices(id, s)
	o.mu.Lock()
	o.agents = append(o.agents, s)
	o.mu.Unlock()
	o.wg.Go(func() {
		defer cancel()
		_ = s.Serve(l)
	})
	return nil
}

func (o *openconfig) Conn(id int64) (grpc.ClientConnInterface, error) {
	if err := o.cfg.CheckAgent(id); err != nil {
		return nil, err
	}
	return o.conns.get(id, func() (*grpc.ClientConn, error) {
		t := openconfigTarget(id)
		return o.dial.DialContext(o.life, t.ID, t.Type,
			grpc.WithTransportCredentials(insecure.NewCredentials()), topology.MaxMessageSize(o.cfg.MaxMessageSize))
	})
}

func (o *openconfig) Close(ctx context.Context) error {
	o.conns.close()
	o.mu.Lock()
	agents := o.agents
	o.mu.Unlock()
	stopAll(ctx, agents)
	o.cancel()
	o.server.Stop()
	o.wg.Wait()
	return nil
}
