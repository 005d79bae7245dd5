// Package agentk assembles an agent process from the tunnel core: the connection to kas, the tunnel
// pool, the built-in demo service, and the metrics and health endpoints.
//
// It is what cmd/agentk runs and what the harness embeds for separate-process topologies; it holds no
// tunnel logic of its own.
package agentk

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tracing"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunclient/h2conn"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// DefaultKasAddress is where agentk looks for kas's agent API.
const DefaultKasAddress = "127.0.0.1:8150"

// Config configures an agentk.
type Config struct {
	KasAddress string
	Token      string
	// Pool is the tunnel pool configuration; KasConn is filled in by New.
	Pool tunclient.Config
	// MetricsListen serves /metrics, /healthz and /readyz; empty disables it.
	MetricsListen string
	// NoDemo leaves the built-in demo service out. It is left out too when Expose names it.
	NoDemo bool
	// Expose maps a gRPC service name to the address of a plaintext gRPC server next to the agent: the
	// agent advertises the service with all its methods and forwards its calls there as raw frames.
	Expose map[string]string
	// HTTPUpstream, when set, receives the HTTP requests kas's HTTP listener sends to this agent
	// (/agents/{id}/{path} arrives as /{path}).
	HTTPUpstream *url.URL
	// TLS, when set, secures the connection to kas (verifying kas, and presenting a client certificate
	// for mutual TLS when it has one); nil is plaintext, for loopback development only.
	TLS *tls.Config
	// KasClient is the client of the connection to kas: KasClientHTTP2 (the default when empty) or
	// KasClientGRPC.
	KasClient string
	// DialOptions are added to the connection to kas. They are gRPC-go's: setting them selects
	// KasClientGRPC.
	DialOptions []grpc.DialOption
	// OTLPEndpoint, when set, exports a span per proxied call over OTLP/gRPC (HOST:PORT, plaintext).
	OTLPEndpoint string
	Log          *slog.Logger
}

// The clients an agent can connect to kas with.
const (
	// KasClientHTTP2 is tunclient.DialKasHTTP2's: gRPC's protocol on an HTTP/2 client that spends
	// no goroutine on an idle tunnel.
	KasClientHTTP2 = "http2"
	// KasClientGRPC is gRPC-go's ClientConn (tunclient.DialKas), as agents before h2conn.
	KasClientGRPC = "grpc"
)

// Agentk is one running agent process.
type Agentk struct {
	cfg             Config
	shutdownTracing func(context.Context) error
	conn            tunclient.KasConn
	upstreams       []*upstreamConn
	httpUp          *httptunnel.Upstream
	agent           *tunclient.Agent
	metrics         *metrics.Provider
	http            *http.Server
	lis             net.Listener
	wg              sync.WaitGroup
}

// New dials kas (lazily: nothing is sent before Start) and builds the agent.
func New(cfg Config) (*Agentk, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.KasAddress == "" {
		return nil, errors.New("agentk: kas address is required")
	}
	mp, err := metrics.New(metrics.WithRuntimeMetrics())
	if err != nil {
		return nil, err
	}
	serverMetrics, err := metrics.GRPCServer(mp)
	if err != nil {
		return nil, err
	}
	clientMetrics, err := metrics.GRPCClient(mp)
	if err != nil {
		return nil, err
	}
	var conn tunclient.KasConn
	switch {
	case cfg.KasClient == KasClientGRPC || len(cfg.DialOptions) > 0:
		dial := append([]grpc.DialOption{
			grpc.WithChainStreamInterceptor(clientMetrics.StreamClientInterceptor()),
			grpc.WithChainUnaryInterceptor(clientMetrics.UnaryClientInterceptor()),
		}, cfg.DialOptions...)
		if cfg.TLS != nil {
			conn, err = tunclient.DialKasTLS(cfg.KasAddress, cfg.Token, cfg.TLS, dial...)
		} else {
			conn, err = tunclient.DialKas(cfg.KasAddress, cfg.Token, dial...)
		}
	case cfg.KasClient == "" || cfg.KasClient == KasClientHTTP2:
		// The agent's only calls to kas are tunnels, which are streams: no unary interceptor.
		conn, err = tunclient.DialKasHTTP2(cfg.KasAddress, cfg.Token, h2conn.Options{
			TLS:                cfg.TLS,
			StreamInterceptors: []grpc.StreamClientInterceptor{clientMetrics.StreamClientInterceptor()},
		})
	default:
		err = fmt.Errorf("agentk: kas client %q is neither %s nor %s", cfg.KasClient, KasClientHTTP2, KasClientGRPC)
	}
	if err != nil {
		return nil, err
	}
	tp, shutdownTracing, err := tracing.Provider(context.Background(), cfg.OTLPEndpoint, "agentk")
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	pool := cfg.Pool
	pool.KasConn = conn
	pool.Tracer = tp.Tracer("github.com/tunnelbench/tunnelbench/core/agentk")
	pool.Meter = mp.Meter("github.com/tunnelbench/tunnelbench/core/agentk")
	pool.Log = cfg.Log
	pool.UnaryInterceptors = append(pool.UnaryInterceptors, serverMetrics.UnaryServerInterceptor())
	pool.StreamInterceptors = append(pool.StreamInterceptors, serverMetrics.StreamServerInterceptor())
	a, err := tunclient.New(pool)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	// An exposed upstream serving the demo service (a tunnelbench demo-server, say) takes its place.
	if _, exposed := cfg.Expose[demo.Demo_ServiceDesc.ServiceName]; !cfg.NoDemo && !exposed {
		demo.Register(a)
	}
	k := &Agentk{cfg: cfg, conn: conn, agent: a, metrics: mp, shutdownTracing: shutdownTracing}
	if cfg.HTTPUpstream != nil {
		up, err := httptunnel.Register(a, cfg.HTTPUpstream, httptunnel.WithLogger(cfg.Log))
		if err != nil {
			a.Stop(context.Background())
			_ = conn.Close()
			return nil, fmt.Errorf("--http-upstream %s: %w", cfg.HTTPUpstream, err)
		}
		k.httpUp = up
	}
	for svc, addr := range cfg.Expose {
		up, err := dialUpstream(addr, a.MaxMessageSize())
		if err == nil {
			k.upstreams = append(k.upstreams, up) // closed below if this one or a later one fails
			err = a.Expose(svc, up)
		}
		if err != nil {
			k.closeUpstreams()
			a.Stop(context.Background())
			_ = conn.Close()
			return nil, fmt.Errorf("--expose %s=%s: %w", svc, addr, err)
		}
	}
	return k, nil
}

// Agent is the tunnel agent: register more services on it before Start.
func (k *Agentk) Agent() *tunclient.Agent { return k.agent }

// Start opens the metrics listener and the tunnels.
func (k *Agentk) Start() error {
	if k.cfg.MetricsListen != "" {
		l, err := cli.Listen("metrics-listen", k.cfg.MetricsListen)
		if err != nil {
			k.agent.Stop(context.Background())
			return err
		}
		k.lis = l
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", k.metrics.Handler())
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
			if k.agent.Stats().Idle == 0 {
				http.Error(w, "not ready: no idle tunnel to kas", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ready\n"))
		})
		k.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			_ = k.http.Serve(l)
		}()
	}
	if err := k.agent.Start(); err != nil {
		k.agent.Stop(context.Background())
		k.stopHTTP()
		return err
	}
	k.cfg.Log.Info("agentk started", "kas", k.cfg.KasAddress, "metrics", k.cfg.MetricsListen, "tls", k.cfg.TLS != nil)
	if k.cfg.TLS == nil {
		k.cfg.Log.Warn("the connection to kas is plaintext: the agent token crosses the network in the clear; use --kas-ca-file beyond loopback")
	}
	return nil
}

// MetricsAddr is the metrics listener's address, or nil.
func (k *Agentk) MetricsAddr() net.Addr {
	if k.lis == nil {
		return nil
	}
	return k.lis.Addr()
}

// Stop stops gracefully: calls in flight finish unless ctx ends first.
func (k *Agentk) Stop(ctx context.Context) {
	k.agent.Stop(ctx)
	_ = k.conn.Close()
	k.closeUpstreams()
	k.stopHTTP()
	_ = k.metrics.Shutdown(context.Background())
	if k.shutdownTracing != nil {
		tctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = k.shutdownTracing(tctx)
		cancel()
	}
	k.cfg.Log.Info("agentk stopped")
}

func (k *Agentk) stopHTTP() {
	if k.http != nil {
		_ = k.http.Close()
	}
	k.wg.Wait()
}

func (k *Agentk) closeUpstreams() {
	for _, u := range k.upstreams {
		_ = u.Close()
	}
	if k.httpUp != nil {
		k.httpUp.Close()
	}
}
