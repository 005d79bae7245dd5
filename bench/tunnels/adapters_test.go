package tunnels

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// testAgents is how many agents each adapter starts in the suite: more than one, so that calls must
// reach the agent asked for.
const testAgents = 3

// testTimeout bounds each adapter's whole check.
const testTimeout = 2 * time.Minute

// TestAdapters starts every registered adapter, calls each agent with unary 64 B and 1 MiB calls, a
// server stream and a bidi stream, and closes it without leaking a goroutine.
func TestAdapters(t *testing.T) {
	for _, name := range checkedAdapters() {
		t.Run(name, func(t *testing.T) {
			defer verifyNoLeaks(t)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			r, err := Start(ctx, name, Config{Agents: testAgents, Register: registerNamedDemo})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := r.Close(ctx); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			if r.Idle.Agents != testAgents || r.Idle.GoroutinesPerAgent < 1 {
				t.Errorf("idle cost %+v: want %d agents, each with a goroutine at least", r.Idle, testAgents)
			}
			for id := int64(1); id <= testAgents; id++ {
				conn, err := r.Conn(id)
				if err != nil {
					t.Fatalf("agent %d: %v", id, err)
				}
				checkCalls(ctx, t, id, demo.NewDemoClient(conn))
			}
			if _, err := r.Conn(testAgents + 1); err == nil {
				t.Errorf("Conn(%d) of %d agents: no error", testAgents+1, testAgents)
			}
		})
	}
}

// namedDemo is the demo service of agent id, whose Echo says which agent answered.
type namedDemo struct {
	demo.Server
	id int64
}

func (s namedDemo) Echo(ctx context.Context, req *demo.EchoRequest) (*demo.EchoResponse, error) {
	resp, err := s.Server.Echo(ctx, req)
	if err == nil {
		resp.Message = agentMessage(s.id, resp.GetMessage())
	}
	return resp, err
}

func agentMessage(id int64, msg string) string { return fmt.Sprintf("agent %d: %s", id, msg) }

func registerNamedDemo(id int64, s grpc.ServiceRegistrar) {
	demo.RegisterDemoServer(s, namedDemo{id: id})
}

// checkCalls makes every call shape of the suite to agent id, and checks that agent id answered.
func checkCalls(ctx context.Context, t *testing.T, id int64, c demo.DemoClient) {
	t.Helper()
	for _, size := range []int{64, 1 << 20} {
		payload := bytes.Repeat([]byte{byte(id)}, size)
		resp, err := c.Echo(ctx, &demo.EchoRequest{Message: "hello", Payload: payload})
		if err != nil {
			t.Fatalf("agent %d: echo %d B: %v", id, size, err)
		}
		if resp.GetMessage() != agentMessage(id, "hello") || !bytes.Equal(resp.GetPayload(), payload) {
			t.Fatalf("agent %d: echo %d B came back as %q and %d B", id, size, resp.GetMessage(), len(resp.GetPayload()))
		}
	}
	ss, err := c.ServerStream(ctx, &demo.StreamRequest{Count: 4, ResponseSize: 1 << 10})
	if err != nil {
		t.Fatalf("agent %d: server stream: %v", id, err)
	}
	n := 0
	for {
		m, err := ss.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("agent %d: server stream after %d messages: %v", id, n, err)
		}
		if len(m.GetPayload()) != 1<<10 {
			t.Fatalf("agent %d: server stream message %d has %d B, want 1024", id, n, len(m.GetPayload()))
		}
		n++
	}
	if n != 4 {
		t.Fatalf("agent %d: server stream gave %d messages, want 4", id, n)
	}
	chat, err := c.Chat(ctx)
	if err != nil {
		t.Fatalf("agent %d: chat: %v", id, err)
	}
	for i, msg := range []string{"ping", "pong", "again"} {
		if err := chat.Send(&demo.EchoRequest{Message: msg, Payload: make([]byte, 1<<10)}); err != nil {
			t.Fatalf("agent %d: chat send %d: %v", id, i, err)
		}
		m, err := chat.Recv()
		if err != nil || m.GetMessage() != msg {
			t.Fatalf("agent %d: chat reply %d: %q, %v", id, i, m.GetMessage(), err)
		}
	}
	if err := chat.CloseSend(); err != nil {
		t.Fatalf("agent %d: chat close: %v", id, err)
	}
	if _, err := chat.Recv(); err != io.EOF {
		t.Fatalf("agent %d: chat end: %v, want EOF", id, err)
	}
}

// TestIdleCost measures every adapter's idle agents as a run does: each holds heap, and a goroutine at
// least (a connection or a listener, and what serves it).
func TestIdleCost(t *testing.T) {
	testtier.Full(t, "connects a thousand agents to every adapter, seconds")
	for _, name := range checkedAdapters() {
		t.Run(name, func(t *testing.T) {
			defer verifyNoLeaks(t)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			r, err := Start(ctx, name, Config{Agents: DefaultIdleAgents})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := r.Close(ctx); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			idle := r.Idle
			t.Logf("idle per agent: %.1f KiB heap, %.1f KiB stacks, %.1f goroutines", idle.HeapBytesPerAgent/1024, idle.StackBytesPerAgent/1024, idle.GoroutinesPerAgent)
			if idle.Agents != DefaultIdleAgents || idle.HeapBytesPerAgent <= 0 || idle.GoroutinesPerAgent < 1 {
				t.Errorf("idle cost %+v: want %d agents, each with heap and a goroutine at least", idle, DefaultIdleAgents)
			}
		})
	}
}
