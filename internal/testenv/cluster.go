package testenv

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
)

// ClusterOptions configure StartCluster. Zero values are fine.
type ClusterOptions struct {
	// Tracker is shared by every kas; nil means a new in-memory tracker.
	Tracker tracker.Tracker
	// Kas adjusts kas i's config before it starts.
	Kas func(i int, c *kas.Config)
	// AgentDial adds dial options to agents' connections; CallerDial to the public API clients.
	AgentDial, CallerDial []grpc.DialOption
	// GRPCClient connects agents with gRPC-go's ClientConn instead of h2conn, the default.
	GRPCClient bool
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
	kas     []*topology.Kas
	down    []bool
}

// clusterAgents is how many agent ids (1..clusterAgents) a cluster accepts.
const clusterAgents = 100

// StartCluster starts n kas instances. Agents are started with StartAgent, on the kas of your choice.
func StartCluster(t testing.TB, n int, opts ClusterOptions) *Cluster {
	t.Helper()
	c := &Cluster{t: t, opts: opts, Tracker: opts.Tracker, down: make([]bool, n)}
	var err error
	if c.Secret, err = topology.NewSecret(); err != nil {
		t.Fatal(err)
	}
	if c.Tracker == nil {
		c.Tracker = tracker.NewMemory(0)
	}
	auth, err := topology.AgentTokens(clusterAgents, Token)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		cfg := topology.KasConfig{Index: i, Auth: auth, Tracker: c.Tracker, Secret: c.Secret, FindTimeout: findTimeout,
			ShutdownGrace: shutdownGrace, UnregisterDelay: 200 * time.Millisecond}
		if opts.Kas != nil {
			cfg.Adjust = func(kc *kas.Config) { opts.Kas(i, kc) }
		}
		k, err := topology.StartKas(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.kas = append(c.kas, k)
		c.Kas = append(c.Kas, k.Server)
		c.Metrics = append(c.Metrics, k.Metrics)
		t.Cleanup(func() { c.StopKas(i) })
		pub, err := k.DialAPI(opts.CallerDial...)
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
	c.t.Helper()
	return c.StartAgentServing(id, i, func(*tunclient.Agent) {})
}

// StartAgentServing is StartAgent with register registering extra services on the agent before it
// starts.
func (c *Cluster) StartAgentServing(id int64, i int, register func(*tunclient.Agent)) *AgentEnv {
	t := c.t
	t.Helper()
	ae := startAgent(t, c.kas[i], id, Options{AgentDial: c.opts.AgentDial, GRPCClient: c.opts.GRPCClient}, func(*tunclient.Config) {}, register)
	Eventually(t, 10*time.Second, func() bool { return c.Kas[i].Registry().Stats().IdleTunnels >= int64(tunclient.DefaultMinIdle) },
		"agent %d never got idle tunnels on kas %d", id, i)
	return ae
}

// StopAgent stops an agent started with StartAgent.
func (c *Cluster) StopAgent(ae *AgentEnv) { stopAgent(ae) }
