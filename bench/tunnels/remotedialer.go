package tunnels

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
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
// Under 1 MiB calls from 16 callers it stalls on this machine (4 of 4 tries, with this dialer and with
// ClientConnect's TCP dial alike): each side's writes wait in backPressure.Wait for the other to resume
// reading, which it does not. RunCase reports that as a stall. Close then ends every goroutine but
// remotedialer's own agent-side copy of each stalled connection: its session's end does not wake that
// write, and nothing outside the library can (see remotedialerLeak). Its connections also keep their
// error and deadlines without a lock, so the race detector reports races inside it; make test checks it
// without -race (test-racy-peers).
//
// Its newest versions (v0.5.2 and later tags) need Go 1.26.10 or 1.27; this is the newest build that
// declares a Go this project builds with (go.mod pins the pseudo-version).
const Remotedialer = "remotedialer"

// remotedialerRetry is how long an agent waits before it dials the server again, ClientConnect's
// pause, but cut short when the agent stops.
const remotedialerRetry = 5 * time.Second

// remotedialerPipesWait bounds the wait for the agents' copies to end at Close: they end at once,
// unless stuck since a stall.
const remotedialerPipesWait = 2 * time.Second

// remotedialerIDHeader carries the agent's key, as in remotedialer's example server.
const remotedialerIDHeader = "X-Tunnel-ID"

// remotedialerLeak is the function of the agent-side goroutine that remotedialer leaves for each
// connection that was stalled when its session closed.
const remotedialerLeak = "github.com/rancher/remotedialer.pipe"

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
	// pipes counts the agents' local connections that remotedialer still copies to.
	pipes atomic.Int64

	mu      sync.Mutex
	servers []*grpc.Server
	// dialed are the tunnel connections callers' transports got from the server's dialer.
	dialed []net.Conn
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
	r.cfg.RegisterServices(id, s)
	r.mu.Lock()
	r.servers = append(r.servers, s)
	r.mu.Unlock()
	r.wg.Go(func() { _ = s.Serve(l) })
	headers := http.Header{remotedialerIDHeader: []string{remotedialerKey(id)}}
	local := func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := route.Dial(ctx, "")
		if err != nil {
			return nil, err
		}
		r.pipes.Add(1)
		return &closeNotifier{Conn: c, closed: func() { r.pipes.Add(-1) }}, nil
	}
	allowAll := func(string, string) bool { return true }
	var ws *websocket.Dialer // nil: remotedialer's own
	if r.cfg.AgentDial != nil {
		dial := r.cfg.agentDialer(id)
		ws = &websocket.Dialer{HandshakeTimeout: remotedialer.HandshakeTimeOut,
			NetDialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) }}
	}
	r.agentsWG.Go(func() {
		for r.agentsLife.Err() == nil {
			err := remotedialer.ConnectToProxyWithDialer(r.agentsLife, r.url, headers, allowAll, ws, local, nil)
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
	if err := r.cfg.CheckAgent(id); err != nil {
		return nil, err
	}
	dial := r.server.Dialer(remotedialerKey(id))
	return r.conns.get(id, func() (*grpc.ClientConn, error) {
		return grpc.NewClient("passthrough:///"+remotedialerKey(id),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				c, err := dial(ctx, "tcp", addr)
				if err != nil {
					return nil, err
				}
				r.mu.Lock()
				r.dialed = append(r.dialed, c)
				r.mu.Unlock()
				return noDeadlines{c}, nil
			}),
			grpc.WithTransportCredentials(insecure.NewCredentials()), topology.MaxMessageSize(r.cfg.MaxMessageSize))
	})
}

func (r *remoteDialer) Close(ctx context.Context) error {
	// Agents go first, then the callers' connections once the server has dropped every session.
	r.stopAgents()
	r.agentsWG.Wait()
	gone := poll.Until(ctx, DefaultCloseTimeout, connectPoll, func() bool { return len(r.server.ListClients()) == 0 })
	// The agents' copies end with their sessions, but for those stuck in a stall (see remotedialerLeak).
	_ = poll.Until(ctx, remotedialerPipesWait, connectPoll, func() bool { return r.pipes.Load() == 0 })
	// A closed session does not wake a write that waits for the far end to resume reading (after a
	// stall): only the connection's own Close does, which gRPC would call 5 s into closing a transport.
	r.mu.Lock()
	servers, dialed := r.servers, r.dialed
	r.dialed = nil
	r.mu.Unlock()
	for _, c := range dialed {
		_ = c.Close()
	}
	r.conns.close()
	stopAll(ctx, servers)
	err := r.http.Close()
	r.wg.Wait()
	if gone != nil {
		err = errors.Join(err, fmt.Errorf("sessions still open at close: %w", gone))
	}
	return err
}

// noDeadlines is a remotedialer connection without deadlines. Its deadline setters write fields that its
// reads and writes use with no lock, so gRPC's closing of a transport (which sets both deadlines, from two
// goroutines at once when the reader and the caller both close it) races; and each write under a
// deadline keeps a goroutine until the deadline. gRPC bounds its closing writes with a timer of its
// own and then closes the connection, which ends its reads and writes as the deadlines would.
type noDeadlines struct{ net.Conn }

func (noDeadlines) SetDeadline(time.Time) error      { return nil }
func (noDeadlines) SetReadDeadline(time.Time) error  { return nil }
func (noDeadlines) SetWriteDeadline(time.Time) error { return nil }

// closeNotifier calls closed once, at its first Close.
type closeNotifier struct {
	net.Conn
	once   sync.Once
	closed func()
}

func (c *closeNotifier) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.closed)
	return err
}
