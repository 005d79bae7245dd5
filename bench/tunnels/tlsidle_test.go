package tunnels

import (
	"context"
	"testing"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testcerts"
)

// maxTLSIdleExtra is what TLS may add to an idle agent, both ends: crypto/tls's state and record
// buffers (about 10 KiB here). A read buffer of gRPC's or h2conn's in front of crypto/tls, which
// buffers a record itself, would add 32 or 4 KiB per connection, held while it is idle.
const maxTLSIdleExtra = 16 << 10

// TestIdleCostOverTLS: idle agents connected over TLS, as deployed, cost about what they cost over
// plaintext (which is what bench measures).
func TestIdleCostOverTLS(t *testing.T) {
	const agents = 300
	certs := testcerts.New(t)
	plain := idleAgents(t, agents, nil)
	secured := idleAgents(t, agents, certs)
	t.Logf("idle per agent, plaintext: %.1f KiB heap, %.1f KiB stacks, %.1f goroutines", plain.HeapBytesPerAgent/1024, plain.StackBytesPerAgent/1024, plain.GoroutinesPerAgent)
	t.Logf("idle per agent, TLS:       %.1f KiB heap, %.1f KiB stacks, %.1f goroutines", secured.HeapBytesPerAgent/1024, secured.StackBytesPerAgent/1024, secured.GoroutinesPerAgent)
	if extra := secured.HeapBytesPerAgent - plain.HeapBytesPerAgent; extra > maxTLSIdleExtra {
		t.Errorf("TLS adds %.1f KiB of heap per idle agent, more than %d KiB", extra/1024, maxTLSIdleExtra>>10)
	}
	if secured.GoroutinesPerAgent != plain.GoroutinesPerAgent {
		t.Errorf("%.1f goroutines per agent over TLS, %.1f over plaintext", secured.GoroutinesPerAgent, plain.GoroutinesPerAgent)
	}
}

// idleAgents measures n idle agents of this project's tunnel (reuse, the default pool), over TLS when
// certs is set, as Start measures adapters.
func idleAgents(t *testing.T, n int, certs *testcerts.Set) IdleCost {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	auth, err := topology.AgentTokens(n, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := topology.StartKas(topology.KasConfig{Auth: auth, AgentOnly: true, Adjust: func(c *kas.Config) {
		if certs != nil {
			c.TLS = &kas.TLSConfig{CertFile: certs.ServerCert, KeyFile: certs.ServerKey}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(ctx)
	before := Snapshot()
	agents, err := topology.StartAgents(ctx, n, func(id int64) (topology.AgentConfig, error) {
		route, err := k.AgentRoute(id)
		ac := topology.AgentConfig{ID: id, Route: route}
		if certs != nil {
			ac.TLS = tlsfiles.Client(certs.Pool, "localhost", nil)
		}
		return ac, err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer agents.Stop(ctx)
	want := int64(n * tunclient.DefaultMinIdle)
	if err := topology.WaitIdle(ctx, testTimeout, want, func() int64 { return k.Server.Registry().Stats().IdleTunnels }); err != nil {
		t.Fatal(err)
	}
	return idleCost(before, Snapshot(), n)
}
