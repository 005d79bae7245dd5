package kas_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// Large payloads cross a tunnel in pooled buffers that go back to their pool once read (rpc/pooled.go):
// a buffer put back while still in use would carry another call's bytes. Concurrent calls of distinct
// large payloads, on every path and variant, each get exactly their own bytes back, also with several
// messages of one stream waiting at once.
func TestPooledPayloadsReachOnlyTheirCaller(t *testing.T) {
	serveDemo := func(_ int64, a *tunclient.Agent) { demo.Register(a) }
	forEachVariant(t, func(t *testing.T, v variant) {
		e := testenv.Start(t, v.options(testenv.Options{Register: serveDemo}))
		for name, conn := range map[string]grpc.ClientConnInterface{"public": e.Public, "internal": e.Kas.InternalConn()} {
			t.Run(name, func(t *testing.T) { echoDistinctPayloads(t, demo.NewDemoClient(conn)) })
		}
	})
	t.Run("two-hop", func(t *testing.T) {
		c := testenv.StartCluster(t, 2, testenv.ClusterOptions{})
		c.StartAgentServing(1, 1, func(a *tunclient.Agent) { demo.Register(a) })
		for name, conn := range map[string]grpc.ClientConnInterface{"public": c.Public[0], "internal": c.Kas[0].InternalConn()} {
			t.Run(name, func(t *testing.T) { echoDistinctPayloads(t, demo.NewDemoClient(conn)) })
		}
	})
}

// echoDistinctPayloads runs callers concurrently, each echoing payloads of its own pattern (unary, and a
// chat whose requests are all sent before any answer is read), and checks every byte that comes back.
func echoDistinctPayloads(t *testing.T, c demo.DemoClient) {
	const callers, calls = 6, 3
	// Medium payloads travel pooled inside batches, large ones alone.
	sizes := []int{1 << 10, 4<<10 + 3, grpctool.LargeMin, 200 << 10, 1 << 20}
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			ctx := testenv.AgentCtx(testCtx(t), 1)
			for i := range calls {
				body := distinctPayload(g, i, sizes[(g+i)%len(sizes)])
				resp, err := c.Echo(ctx, &demo.EchoRequest{Payload: body})
				if err != nil {
					t.Errorf("caller %d call %d: %v", g, i, err)
					return
				}
				if !bytes.Equal(resp.GetPayload(), body) {
					t.Errorf("caller %d call %d: the %d bytes back are not the %d sent", g, i, len(resp.GetPayload()), len(body))
					return
				}
			}
			if err := chatDistinctPayloads(ctx, c, g, sizes); err != nil {
				t.Errorf("caller %d chat: %v", g, err)
			}
		})
	}
	wg.Wait()
}

func chatDistinctPayloads(ctx context.Context, c demo.DemoClient, g int, sizes []int) error {
	chat, err := c.Chat(ctx)
	if err != nil {
		return err
	}
	var sent [][]byte
	for i, size := range sizes {
		body := distinctPayload(g, 100+i, size)
		if err := chat.Send(&demo.EchoRequest{Payload: body}); err != nil {
			return err
		}
		sent = append(sent, body)
	}
	if err := chat.CloseSend(); err != nil {
		return err
	}
	for i, body := range sent {
		resp, err := chat.Recv()
		if err != nil {
			return fmt.Errorf("answer %d: %w", i, err)
		}
		if !bytes.Equal(resp.GetPayload(), body) {
			return fmt.Errorf("answer %d: the %d bytes back are not the %d sent", i, len(resp.GetPayload()), len(body))
		}
	}
	if _, err := chat.Recv(); err != io.EOF {
		return fmt.Errorf("end: %v, want io.EOF", err)
	}
	return nil
}

// distinctPayload is size bytes in a pattern of caller g and call i.
func distinctPayload(g, i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(j*7 + g*31 + i*131 + j>>8)
	}
	return b
}
