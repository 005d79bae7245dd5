package tunnels

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rancher/remotedialer"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/internal/poll"
)

// Remotedialer is github.com/rancher/remotedialer: TCP over a websocket. As in its example server and
// client, the server authorizes each agent by its X-Tunnel-ID header and the caller dials through
// Server.Dialer(key), here under grpc.WithContextDialer. The agent dials what the caller asks for with
// ConnectToProxyWithDialer's local dialer, which reaches its gRPC server in memory: like every other
// adapter's agent, it serves the demo service without another socket behind the tunnel.
//
// Its newest versions (v0.5.2 and later tags) need Go 1.26.10 or 1.27; this is the newest build that
// declares a Go this project builds with (go.mod pins the pseudo-version).
const Remotedialer = "remotedialer"

// remotedialerRetry is how long an agent waits before it dials the server again, ClientConnect's
// pause, but cut short when the agent stops.
const remotedialerRetry = 5 * time.Second

// remotedialerIDHeader carries the agent's key, as in remotedialer's example server.
const remotedialerIDHeader = "X-Tunnel-ID"

func init() {
	Register(Registration{Name: Remotedialer, Kind: KindPeer, About: "github.com/rancher/remotedialer v0.6.0-rc.1.0.20250916111157-f160aa32568d: TCP over a websocket",
		Adapter: StartFunc(startRemotedialer)})
}

var quietLogrus sync.Once

type remoteDialer struct {
	cfg    Config
	server *remotedialer.Server
	http   *http.Server
	url    string
	wg     sync.WaitGroup
	conns  connSet
	// agentsLife ends the agents' connections first at Close, so that the server's websocket handlers
	// (hijacked, out of http.Server's reach) end with them.
	agentsLife context.Context
	stopAgents context.CancelFunc
	agentsWG   sync.WaitGroup

	mu      sync.Mutex
	servers []*grpc.Server
}

func remotedialerKey(id int64) string { return "agent-" + strconv.FormatInt(id, 10) }

func startRemotedialer(_ context.Context, cfg Config) (Tunnel, error) {
	// remotedialer logs every connection through logrus (which nothing else here uses), and warns at
	// every close: a run's output would drown in it.
	quietLogrus.Do(func() { logrus.SetLevel(logrus.ErrorLevel) })
	r := &remoteDialer{cfg: cfg}
	r.server = remotedialer.New(func(req *http.Request) (string, bool, error) {
		id := req.Header.Get(remotedialerIDHeader)
		return id, id != "", nil
	}, remotedialer.DefaultErrorWriter)
	l, route, err := topology.TCP.Listen(topology.Hop{Kind: topology.AgentKas})
	if err != nil {
		return nil, err
	}
	r.url = "ws://" + route.Target + "/connect"
	mux := http.NewServeMux()
	mux.Handle("/connect", r.server)
	r.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	r.wg.Go(func() { _ = r.http.Serve(l) })
	r.agentsLife, r.stopAgents = context.WithCancel(context.Background())
	return r, nil
}

func (r *remoteDialer) ConnectAgents(ctx context.Context) error {
	for id := int64(1); id <= int64(r.cfg.Agents); id++ {
		r.startAgent(id)
	}
	return poll.Until(ctx, DefaultConnectTimeout, connectPoll, func() bool {
		for id := int64(1); id <= int64(r.cfg.Agents); id++ {
			if !r.server.HasSession(remotedialerKey(id)) {
				return false
			}
		}
		return true
	})
}

// startAgent runs agent id: a gRPC server in memory, and a connection to the server that comes back
// after a failure, as remotedialer's agents loop on ClientConnect.
func (r *remoteDialer) startAgent(id int64) {
	l, route, _ := topology.InMemory.Listen(topology.Hop{Kind: topology.CallerDirect}) // in memory: cannot fail
	s := grpc.NewServer(grpc.MaxRecvMsgSize(r.cfg.MaxMessageSize), grpc.MaxSendMsgSize(r.cfg.MaxMessageSize))
	r.cfg.register(id, s)
	r.mu.Lock()
	r.servers = append(r.servers, s)
	r.mu.Unlock()
	r.wg.Go(func() { _ = s.Serve(l) })
	headers := http.Header{remotedialerIDHeader: []string{remotedialerKey(id)}}
	local := func(ctx context.Context, _, _ string) (net.Conn, error) { return route.Dial(ctx, "") }
	allowAll := func(string, string) bool { return true }
	r.agentsWG.Go(func() {
		for r.agentsLife.Err() == nil {
			err := remotedialer.ConnectToProxyWithDialer(r.agentsLife, r.url, headers, allowAll, nil, local, nil)
			if err == nil || errors.Is(err, context.Canceled) {
				continue
			}
			select {
			case <-r.agentsLife.Done():
			case <-time.After(remotedialerRetry):
			}
		}
	})
}

func (r *remoteDialer) Conn(id int64) (grpc.ClientConnInterface, error) {
	if err := checkAgent(r.cfg, id); err != nil {
		return nil, err
	}
	dial := r.server.Dialer(remotedialerKey(id))
	return r.conns.get(id, func() (*grpc.ClientConn, error) {
		return grpc.NewClient("passthrough:///"+remotedialerKey(id),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()), topology.MaxMessageSize(r.cfg.MaxMessageSize))
	})
}

func (r *remoteDialer) Close(ctx context.Context) error {
	// Agents go first, and the callers' connections only once the server has dropped every session:
	// a remotedialer connection written to under a deadline (gRPC sets one, 10 s, when it closes a
	// transport) keeps a goroutine until that deadline, unless the session already closed it.
	r.stopAgents()
	r.agentsWG.Wait()
	gone := poll.Until(ctx, DefaultCloseTimeout, connectPoll, func() bool { return len(r.server.ListClients()) == 0 })
	r.conns.close()
	r.mu.Lock()
	servers := r.servers
	r.mu.Unlock()
	stopAll(ctx, servers)
	err := r.http.Close()
	r.wg.Wait()
	if gone != nil {
		err = errors.Join(err, fmt.Errorf("sessions still open at close: %w", gone))
	}
	return err
}
