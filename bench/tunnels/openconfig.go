package tunnels

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/openconfig/grpctunnel/dialer"
	tpb "github.com/openconfig/grpctunnel/proto/tunnel"
	"github.com/openconfig/grpctunnel/tunnel"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/internal/poll"
)

// OpenconfigGrpctunnel is github.com/openconfig/grpctunnel: TCP over gRPC streams. As its gNMI
// dial-out design has it, each agent registers a target with the tunnel server and serves gRPC on the
// sessions the server opens to it (what tunnel.Listen gives; here the tunnel client runs as in
// openconfig's target program, so that it takes a dialer and comes back after its connection broke);
// the caller, in the tunnel server's process, dials the target through dialer.ServerDialer (a gRPC
// connection whose transport is a session over the tunnel).
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
		if err := ctx.Err(); err != nil {
			return err
		}
		o.startAgent(id)
	}
	return poll.Until(ctx, DefaultConnectTimeout, connectPoll, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.registered) == o.cfg.Agents
	})
}

// startAgent runs agent id until Close: its gRPC server, served the sessions its tunnel client
// accepts, and the tunnel client itself, which comes back after its connection or registration
// broke (see runTarget).
func (o *openconfig) startAgent(id int64) {
	l := newSessionListener(o.addr)
	s := grpc.NewServer(grpc.MaxRecvMsgSize(o.cfg.MaxMessageSize), grpc.MaxSendMsgSize(o.cfg.MaxMessageSize))
	o.cfg.RegisterServices(id, s)
	o.mu.Lock()
	o.agents = append(o.agents, s)
	o.mu.Unlock()
	o.wg.Go(func() { _ = s.Serve(l) })
	o.wg.Go(func() {
		// The backoff of openconfig's target program (cmd/target), reset once a registration went
		// through, so that an agent that was connected comes back as soon as a new one goes through.
		bo := backoff.NewExponentialBackOff()
		bo.MaxElapsedTime = 0
		bo.InitialInterval, bo.MaxInterval, bo.RandomizationFactor = tunnel.RetryBaseDelay, tunnel.RetryMaxDelay, tunnel.RetryRandomization
		for o.life.Err() == nil {
			if o.runTarget(id, l) {
				bo.Reset()
			}
			select {
			case <-o.life.Done():
			case <-time.After(bo.NextBackOff()):
			}
		}
	})
}

// runTarget is one life of agent id's tunnel client, as openconfig's target program runs it
// (tunnel.NewClient, Register, Start) over a gRPC connection of its own to the tunnel server, dialed
// as Config.AgentDial says. tunnel.Listen does the same once but neither takes a dialer nor
// registers again after its connection broke. It returns once the client stopped, and whether it had
// registered.
func (o *openconfig) runTarget(id int64, l *sessionListener) (registered bool) {
	cc, err := grpc.NewClient("passthrough:///"+o.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(o.cfg.agentDialer(id)))
	if err != nil {
		return false
	}
	defer cc.Close()
	target := openconfigTarget(id)
	client, err := tunnel.NewClient(tpb.NewTunnelClient(cc), tunnel.ClientConfig{
		RegisterHandler: func(t tunnel.Target) error {
			if t != target {
				return fmt.Errorf("agent %d serves target %s, not %s", id, target.ID, t.ID)
			}
			return nil
		},
		Handler: func(_ tunnel.Target, rwc io.ReadWriteCloser) error { return l.hand(rwc) },
	}, map[tunnel.Target]struct{}{target: {}})
	if err != nil {
		return false
	}
	ctx, cancel := context.WithCancel(o.life)
	defer cancel()
	if err := client.Register(ctx); err != nil {
		return false
	}
	client.Start(ctx)
	return true
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

// sessionListener hands the sessions an openconfig agent's tunnel client accepts to its gRPC server,
// as tunnel.Listen's listener does, across the client's lives.
type sessionListener struct {
	addr     openconfigAddr
	sessions chan net.Conn
	done     chan struct{}
	once     sync.Once
}

func newSessionListener(addr string) *sessionListener {
	return &sessionListener{addr: openconfigAddr(addr), sessions: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives a session to the gRPC server, or closes it once the listener is closed.
func (l *sessionListener) hand(rwc io.ReadWriteCloser) error {
	select {
	case l.sessions <- &tunnel.Conn{ReadWriteCloser: rwc}:
		return nil
	case <-l.done:
		_ = rwc.Close()
		return net.ErrClosed
	}
}

func (l *sessionListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.sessions:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *sessionListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *sessionListener) Addr() net.Addr { return l.addr }

// openconfigAddr is the tunnel server's address, what tunnel.Listen's listener gives as its own.
type openconfigAddr string

func (openconfigAddr) Network() string  { return "tcp" }
func (a openconfigAddr) String() string { return string(a) }
