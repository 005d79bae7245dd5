package topology

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/internal/poll"
)

func TestKasConfigReportsEveryProblem(t *testing.T) {
	_, err := StartKas(KasConfig{Index: -1, Tracker: tracker.NewMemory(0), Redis: &tracker.RedisConfig{}, AgentOnly: true, HTTP: true})
	if err == nil {
		t.Fatal("a config with every problem started")
	}
	for _, want := range []string{"authenticator is required", "index must not be negative", "exclude each other",
		"needs the private API secret", "agent-only kas serves no HTTP"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// startPair starts one kas on link and agents 1 and 2 on it, and waits for their tunnels.
func startPair(t *testing.T, link Link) (*Kas, Agents) {
	t.Helper()
	auth, err := AgentTokens(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := StartKas(KasConfig{Link: link, Auth: auth, FindTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Shutdown(testCtx(t)) })
	agents, err := StartAgents(testCtx(t), 2, func(id int64) (AgentConfig, error) {
		r, err := k.AgentRoute(id)
		return AgentConfig{ID: id, Route: r, MinIdle: 1}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agents.Stop(testCtx(t)) })
	if err := WaitIdle(testCtx(t), 10*time.Second, 2, func() int64 { return k.Server.Registry().Stats().IdleTunnels }); err != nil {
		t.Fatal(err)
	}
	return k, agents
}

func TestPlainLinks(t *testing.T) {
	for name, link := range map[string]Link{"tcp": TCP, "in-memory": InMemory} {
		t.Run(name, func(t *testing.T) {
			k, agents := startPair(t, link)
			pub, err := k.DialAPI()
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			for id := int64(1); id <= 2; id++ {
				if err := echo(testCtx(t), pub, id); err != nil {
					t.Fatalf("public API, agent %d: %v", id, err)
				}
				if err := echo(testCtx(t), k.Server.InternalConn(), id); err != nil {
					t.Fatalf("internal API, agent %d: %v", id, err)
				}
			}
			// A tunnel is idle again once kas's call_end is in, which kas may hold for a moment after the
			// call (tunnelwriter.CallEndDelay).
			if err := WaitIdle(testCtx(t), 10*time.Second, 2, func() int64 { return int64(agents.Idle()) }); err != nil {
				t.Fatalf("agents' tunnels after the calls: %v", err)
			}
			inMemory := k.Server.Addrs().Agent.Network() != "tcp"
			if inMemory != (link == InMemory) {
				t.Fatalf("agent API on %s", k.Server.Addrs().Agent.Network())
			}
		})
	}
}

// replicaConfig is a kas on link for agent 1 with a private API secret, to give a tracker.
func replicaConfig(t *testing.T, link Link) KasConfig {
	t.Helper()
	auth, err := AgentTokens(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return KasConfig{Link: link, Auth: auth, Secret: secret, FindTimeout: 5 * time.Second}
}

func TestWrappedLinkCarriesEveryHop(t *testing.T) {
	// Two kas share a tracker: agent 1 is on kas 0 and a call entering at kas 1 reaches it over kas 0's
	// private API, every hop through the wrapper's forwarders.
	link := newForwardLink(t)
	cfg := replicaConfig(t, link)
	cfg.Tracker = tracker.NewMemory(0)
	var ks []*Kas
	for i := range 2 {
		cfg.Index = i
		k, err := StartKas(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Shutdown(testCtx(t)) })
		ks = append(ks, k)
	}
	agents, err := StartAgents(testCtx(t), 1, func(id int64) (AgentConfig, error) {
		r, err := ks[0].AgentRoute(id)
		return AgentConfig{ID: id, Route: r, MinIdle: 1}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agents.Stop(testCtx(t)) })
	pub, err := ks[1].DialAPI()
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := echo(testCtx(t), pub, 1); err != nil {
		t.Fatalf("call entering at kas 1: %v", err)
	}
	for _, h := range []Hop{{Kind: KasKas, Kas: 0}, {Kind: AgentKas, Kas: 0, Agent: 1}, {Kind: CallerKas, Kas: 1}} {
		if n := link.carried(h); n < 1 {
			t.Errorf("hop %+v carried %d connections", h, n)
		}
	}
	if n := link.carried(Hop{Kind: KasKas, Kas: 1}); n != 0 {
		t.Errorf("kas 1's private API carried %d connections; no call went there", n)
	}
}

func TestRedisTrackerTakesTheLink(t *testing.T) {
	link := newForwardLink(t)
	cfg := replicaConfig(t, link)
	// Nothing listens at the address: the tracker only has to be made with the forwarder's.
	cfg.Index = 3
	cfg.Redis = &tracker.RedisConfig{Address: "127.0.0.1:1", OpTimeout: 100 * time.Millisecond, DialTimeout: 100 * time.Millisecond}
	k, err := StartKas(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.Kill()
	k.Shutdown(testCtx(t))
	if link.carried(Hop{Kind: KasRedis, Kas: 3}) < 0 {
		t.Fatalf("no kas->redis hop; hops %+v", link.order)
	}
}

func TestAdjustReplacesAListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	auth, err := AgentTokens(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ours net.Listener
	k, err := StartKas(KasConfig{Auth: auth, Adjust: func(c *kas.Config) { ours, c.AgentListener = c.AgentListener, l }})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(testCtx(t))
	if _, err := ours.Accept(); err == nil {
		t.Error("the replaced listener still accepts")
	}
	r, err := k.AgentRoute(1)
	if err != nil || r.Target != l.Addr().String() {
		t.Fatalf("agent route %+v, %v; want %s", r, err, l.Addr())
	}
}

func TestAgentKillAndStop(t *testing.T) {
	k, agents := startPair(t, TCP)
	agents[0].Kill()
	agents[1].Stop(testCtx(t))
	if err := poll.Until(testCtx(t), 10*time.Second, 10*time.Millisecond, func() bool { return k.Server.Registry().Stats().IdleTunnels == 0 }); err != nil {
		t.Fatalf("kas kept %d tunnels of stopped agents: %v", k.Server.Registry().Stats().IdleTunnels, err)
	}
}

func TestStartFailures(t *testing.T) {
	if _, err := StartAgent(AgentConfig{ID: 4}); err == nil || !strings.Contains(err.Error(), "agent 4: no route to kas") {
		t.Errorf("agent without a route: %v", err)
	}
	if _, err := StartAgent(AgentConfig{ID: 5, Route: Route{Target: "127.0.0.1:1"}, MinIdle: -1}); err == nil || !strings.Contains(err.Error(), "agent 5") {
		t.Errorf("agent with a bad config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := StartAgents(ctx, 3, nil); err != context.Canceled {
		t.Errorf("agents with a cancelled context: %v", err)
	}
	err := WaitIdle(context.Background(), 20*time.Millisecond, 2, func() int64 { return 1 })
	if err == nil || !strings.Contains(err.Error(), "agents did not connect: 1 of 2 idle tunnels") {
		t.Errorf("wait: %v", err)
	}
}
