package tracker

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tunnelbench/tunnelbench/internal/testredis"
)

// countingHook counts what the client sends to Redis.
type countingHook struct {
	mu        sync.Mutex
	commands  int   // sent one by one
	pipelines []int // commands per pipeline
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.commands++
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.pipelines = append(h.pipelines, len(cmds))
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func newTestRedis(t *testing.T) (*Redis, context.Context) {
	t.Helper()
	srv := testredis.Start(t)
	r, err := NewRedis(RedisConfig{Address: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return r, ctx
}

func TestRedisRefreshIsOneRoundTrip(t *testing.T) {
	r, ctx := newTestRedis(t)
	// Connect first: the handshake of a new connection is not part of the refresh.
	if err := r.Refresh(ctx, "grpc://10.0.0.1:8155", []int64{0}); err != nil {
		t.Fatal(err)
	}
	h := &countingHook{}
	r.client.AddHook(h)

	const agents = 1000
	ids := make([]int64, agents)
	for i := range ids {
		ids[i] = int64(i)
	}
	if err := r.Refresh(ctx, "grpc://10.0.0.1:8155", ids); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	commands, pipelines := h.commands, slices.Clone(h.pipelines)
	h.mu.Unlock()
	if commands != 0 || len(pipelines) != 1 || pipelines[0] != 2*agents {
		t.Fatalf("Refresh of %d agents sent %d single commands and pipelines %v, want one pipeline of %d commands",
			agents, commands, pipelines, 2*agents)
	}
	n, err := r.client.Exists(ctx, r.key(0), r.key(agents-1)).Result()
	if err != nil || n != 2 {
		t.Fatalf("EXISTS first and last agent = %d, %v; want 2", n, err)
	}
}

// A reader that saw an expired record must not delete it when its kas refreshed it in the meantime.
func TestRedisExpiredCleanupSparesRefreshedRecord(t *testing.T) {
	r, ctx := newTestRedis(t)
	key := r.key(1)
	const kasA, kasB = "grpc://10.0.0.1:8155", "grpc://10.0.0.2:8155"
	seen := "1" // an expiry long past, as the reader saw it
	if err := r.client.HSet(ctx, key, kasA, seen, kasB, seen).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(ctx, kasA, 1); err != nil { // kasA refreshes between the read and the delete
		t.Fatal(err)
	}
	if err := deleteIfUnchanged.Run(ctx, r.client, []string{key}, kasA, seen, kasB, seen).Err(); err != nil {
		t.Fatal(err)
	}
	fields, err := r.client.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fields[kasB]; ok {
		t.Fatalf("the stale record of %s survived: %v", kasB, fields)
	}
	exp, err := strconv.ParseInt(fields[kasA], 10, 64)
	if err != nil || exp <= time.Now().UnixMilli() {
		t.Fatalf("the refreshed record of %s is gone or stale: %v", kasA, fields)
	}
}
