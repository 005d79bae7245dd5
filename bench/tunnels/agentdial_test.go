package tunnels

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/demo"
)

// countingConn counts the bytes read through an agent's link.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

// TestAgentDial starts every adapter with Config.AgentDial and checks that each agent's link goes
// through it: every agent dials, to one address, and the calls to it move bytes over what it dialed.
// The in-memory test adapter has no link to dial and is left out.
func TestAgentDial(t *testing.T) {
	for _, name := range checkedAdapters() {
		if name == trivialName {
			continue
		}
		t.Run(name, func(t *testing.T) {
			defer verifyNoLeaks(t)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var (
				mu    sync.Mutex
				addrs = map[int64]map[string]int{}
				read  = map[int64]*atomic.Int64{}
			)
			for id := int64(1); id <= testAgents; id++ {
				read[id] = &atomic.Int64{}
			}
			dial := func(ctx context.Context, id int64, addr string) (net.Conn, error) {
				mu.Lock()
				if addrs[id] == nil {
					addrs[id] = map[string]int{}
				}
				addrs[id][addr]++
				counter := read[id]
				mu.Unlock()
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil || counter == nil {
					return c, err
				}
				return countingConn{Conn: c, read: counter}, nil
			}
			r, err := Start(ctx, name, Config{Agents: testAgents, Register: registerNamedDemo, AgentDial: dial})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := r.Close(ctx); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			for id := int64(1); id <= testAgents; id++ {
				conn, err := r.Conn(id)
				if err != nil {
					t.Fatalf("agent %d: %v", id, err)
				}
				before := read[id].Load()
				resp, err := demo.NewDemoClient(conn).Echo(ctx, &demo.EchoRequest{Message: "hello", Payload: make([]byte, 64<<10)})
				if err != nil || resp.GetMessage() != agentMessage(id, "hello") {
					t.Fatalf("agent %d: echo: %q, %v", id, resp.GetMessage(), err)
				}
				// The answer (to the caller) or the request (to the agent) crossed the link.
				if got := read[id].Load() - before; got < 64<<10 {
					t.Errorf("agent %d: %d B read over its dialed link during a 64 KiB echo, want at least 64 KiB", id, got)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for id := int64(1); id <= testAgents; id++ {
				if len(addrs[id]) != 1 {
					t.Errorf("agent %d dialed %v, want one address", id, addrs[id])
				}
			}
			if len(addrs) != testAgents {
				t.Errorf("dials for agents %v, want 1..%d", addrs, testAgents)
			}
		})
	}
}
