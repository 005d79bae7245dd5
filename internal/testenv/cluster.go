package testenv

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/internal/testsvc"
)

// ClusterOptions configure StartCluster. Zero values are fine.
type ClusterOptions struct {
	// Tracker is shared by every kas; nil means a new in-memory tracker.
	Tracker tracker.Tracker
	// Kas adjusts kas i's config before it starts.
	Kas func(i int, c *kas.Config)
	// AgentDial adds dial options to agents' connections; CallerDial to the public API clients.
	AgentDial, CallerDial []grpc.DialOption
}

// Cluster is several kas replicas on loopback TCP sharing a tracker and a private API secret.
type Cluster struct {
	t       testing.TB
	opts    ClusterOptions
	Kas     []*kas.Server
	Metrics []*metrics.Provider
	Public  []*grpc.ClientConn
	Tracker tracker.Tracker
	Secret  []byte
	down    []bool
}

// StartCluster starts n kas instances. Agents are started with StartAgent, on the kas of your choice.
func StartCluster(t testing.TB, n int, opts ClusterOptions) *Cluster {
	t.Helper()
	c := &Cluster{t: t, opts: opts, Tracker: opts.Tracker, Secret: make([]byte, 32), down: make([]bool, n)}
	if _, err := rand.Read(c.Secret); err != nil {
		t.Fatal(err)
	}
	if c.Tracker == nil {
		c.Tracker = tracker.NewMemory(0)
	}
	tokens := map[string]int64{}
	for id := int64(1); id <= 100; id++ {
		tokens[Token(id)] = id
	}
	auth, err := auth.NewStaticTokens(tokens)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		mp, err := metrics.New()
		if err != nil {
			t.Fatal(err)
		}
		cfg := kas.Config{
			Dev:              true, // loopback and in-memory listeners only
			AgentListen:      "127.0.0.1:0",
			APIListen:        "127.0.0.1:0",
			PrivateListen:    "127.0.0.1:0",
			Authenticator:    auth,
			FindTimeout:      5 * time.Second,
			MaxConnectionAge: -1,
			ShutdownGrace:    5 * time.Second,
			Tracker:          c.Tracker,
			PrivateAPISecret: c.Secret,
			UnregisterDelay:  200 * time.Millisecond,
			Metrics:          mp,
		}
		if opts.Kas != nil {
			opts.Kas(i, &cfg)
		}
		k, err := kas.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Start(); err != nil {
			t.Fatal(err)
		}
		c.Kas = append(c.Kas, k)
		c.Metrics = append(c.Metrics, mp)
		i := i
		t.Cleanup(func() { c.StopKas(i) })
		pub, err := grpc.NewClient(k.Addrs().API.String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts.CallerDial...)...)
		if err != nil {
			t.Fatal(err)
		}
		c.Public = append(c.Public, pub)
		t.Cleanup(func() { _ = pub.Close() })
	}
	return c
}

// StopKas shuts kas i down gracefully (it unregisters its agents).
func (c *Cluster) StopKas(i int) {
	if c.down[i] {
		return
	}
	c.down[i] = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Kas[i].Shutdown(ctx)
}

// StartAgent starts agent id connected to kas i only, and waits for its idle tunnels there.
func (c *Cluster) StartAgent(id int64, i int) *AgentEnv {
	t := c.t
	t.Helper()
	conn, err := tunclient.DialKas(c.Kas[i].Addrs().Agent.String(), Token(id), c.opts.AgentDial...)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	a, err := tunclient.New(tunclient.Config{KasConn: conn, Meter: mp.Meter("agent"),
		Backoff: tunclient.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond, Factor: 1.6, Jitter: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	svc := testsvc.Register(a)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	ae := &AgentEnv{ID: id, Agent: a, Service: svc, Metrics: mp, conn: conn}
	t.Cleanup(func() { (&Env{}).StopAgent(ae) })
	Eventually(t, 10*time.Second, func() bool { return c.Kas[i].Registry().Stats().IdleTunnels >= int64(tunclient.DefaultMinIdle) },
		"agent %d never got idle tunnels on kas %d", id, i)
	return ae
}
