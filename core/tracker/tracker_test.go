package tracker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/internal/testredis"
)

func TestMain(m *testing.M) {
	// The Redis outage tests make go-redis log every failed dial; the tracker's errors say the same.
	tracker.SetRedisLogger(slog.New(slog.DiscardHandler))
	testredis.VerifyTestMain(m)
}

const (
	kasA = "grpc://10.0.0.1:8155"
	kasB = "grpc://10.0.0.2:8155"
	kasC = "grpc://10.0.0.3:8155"

	// redisTTL is short so that expiry tests run in real time; the steps of the tests keep at least
	// 0.4 TTL between a record's expiry and a check that expects it alive.
	redisTTL = 500 * time.Millisecond
	// testTimeout bounds every wait of these tests that is not bounded by the tracker itself.
	testTimeout = 10 * time.Second
)

// fakeClock is the Memory tracker's clock, moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// impl makes a fresh tracker whose records live ttl, and advance, which lets time pass for it.
type impl struct {
	name string
	new  func(t *testing.T) (tr tracker.Tracker, ttl time.Duration, advance func(time.Duration))
}

var impls = []impl{
	{
		name: "Memory",
		new: func(t *testing.T) (tracker.Tracker, time.Duration, func(time.Duration)) {
			ttl := time.Minute
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			m := tracker.NewMemory(ttl)
			m.Now = clock.Now
			return m, ttl, clock.Advance
		},
	},
	{
		name: "Redis",
		new: func(t *testing.T) (tracker.Tracker, time.Duration, func(time.Duration)) {
			srv := testredis.Start(t)
			r := newRedis(t, tracker.RedisConfig{Address: srv.Addr(), TTL: redisTTL, RefreshPeriod: redisTTL / 2})
			return r, redisTTL, time.Sleep
		},
	},
}

func newRedis(t *testing.T, cfg tracker.RedisConfig) *tracker.Redis {
	t.Helper()
	r, err := tracker.NewRedis(cfg)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// newRawClient is a plain go-redis client, to look at what the tracker wrote.
func newRawClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                     addr,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantKas(t *testing.T, ctx context.Context, tr tracker.Tracker, agentID int64, want ...string) {
	t.Helper()
	got, err := tr.KasURLs(ctx, agentID)
	if err != nil {
		t.Fatalf("KasURLs(%d): %v", agentID, err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("KasURLs(%d) = %q, want %q", agentID, got, want)
	}
}

func TestTracker(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, tr tracker.Tracker, ttl time.Duration, advance func(time.Duration))
	}{
		{"RegisterListUnregister", func(t *testing.T, tr tracker.Tracker, _ time.Duration, _ func(time.Duration)) {
			ctx := testContext(t)
			wantKas(t, ctx, tr, 1)
			mustNil(t, tr.Register(ctx, kasA, 1))
			wantKas(t, ctx, tr, 1, kasA)
			mustNil(t, tr.Register(ctx, kasA, 1)) // twice is once
			wantKas(t, ctx, tr, 1, kasA)
			mustNil(t, tr.Unregister(ctx, kasA, 1))
			wantKas(t, ctx, tr, 1)
			mustNil(t, tr.Unregister(ctx, kasA, 1)) // unknown record is not an error
			mustNil(t, tr.Unregister(ctx, kasB, 2))
		}},
		{"SeveralKasPerAgent", func(t *testing.T, tr tracker.Tracker, _ time.Duration, _ func(time.Duration)) {
			ctx := testContext(t)
			mustNil(t, tr.Register(ctx, kasA, 1))
			mustNil(t, tr.Register(ctx, kasB, 1))
			mustNil(t, tr.Register(ctx, kasC, 2))
			wantKas(t, ctx, tr, 1, kasA, kasB)
			wantKas(t, ctx, tr, 2, kasC)
			mustNil(t, tr.Unregister(ctx, kasA, 1))
			wantKas(t, ctx, tr, 1, kasB)
			wantKas(t, ctx, tr, 2, kasC)
		}},
		{"NegativeAndLargeAgentIDs", func(t *testing.T, tr tracker.Tracker, _ time.Duration, _ func(time.Duration)) {
			ctx := testContext(t)
			mustNil(t, tr.Register(ctx, kasA, -7))
			mustNil(t, tr.Register(ctx, kasB, 1<<62))
			wantKas(t, ctx, tr, -7, kasA)
			wantKas(t, ctx, tr, 1<<62, kasB)
			wantKas(t, ctx, tr, 7)
		}},
		{"RecordsExpireAfterTTL", func(t *testing.T, tr tracker.Tracker, ttl time.Duration, advance func(time.Duration)) {
			ctx := testContext(t)
			mustNil(t, tr.Register(ctx, kasA, 1))
			advance(ttl + ttl/5)
			wantKas(t, ctx, tr, 1)
		}},
		{"RefreshExtendsRecords", func(t *testing.T, tr tracker.Tracker, ttl time.Duration, advance func(time.Duration)) {
			ctx := testContext(t)
			mustNil(t, tr.Register(ctx, kasA, 1))
			mustNil(t, tr.Register(ctx, kasA, 2))
			advance(ttl * 6 / 10)
			mustNil(t, tr.Refresh(ctx, kasA, []int64{1, 2}))
			advance(ttl * 6 / 10) // past the first expiry, before the refreshed one
			wantKas(t, ctx, tr, 1, kasA)
			wantKas(t, ctx, tr, 2, kasA)
		}},
		{"RefreshRecreatesExpiredRecords", func(t *testing.T, tr tracker.Tracker, ttl time.Duration, advance func(time.Duration)) {
			ctx := testContext(t)
			mustNil(t, tr.Register(ctx, kasA, 1))
			advance(ttl + ttl/5)
			wantKas(t, ctx, tr, 1)
			// Refresh also creates records it never saw: kas refreshes what it holds, whatever the tracker lost.
			mustNil(t, tr.Refresh(ctx, kasA, []int64{1, 3}))
			wantKas(t, ctx, tr, 1, kasA)
			wantKas(t, ctx, tr, 3, kasA)
		}},
		{"RefreshOfNothing", func(t *testing.T, tr tracker.Tracker, _ time.Duration, _ func(time.Duration)) {
			ctx := testContext(t)
			mustNil(t, tr.Refresh(ctx, kasA, nil))
			wantKas(t, ctx, tr, 1)
		}},
		{"DeadKasExpiresWhileOthersLive", func(t *testing.T, tr tracker.Tracker, ttl time.Duration, advance func(time.Duration)) {
			ctx := testContext(t)
			mustNil(t, tr.Register(ctx, kasA, 1)) // kasA crashes right after this, without unregistering
			mustNil(t, tr.Register(ctx, kasB, 1))
			advance(ttl * 6 / 10)
			mustNil(t, tr.Refresh(ctx, kasB, []int64{1}))
			advance(ttl * 6 / 10)
			wantKas(t, ctx, tr, 1, kasB)
		}},
		{"ConcurrentUse", func(t *testing.T, tr tracker.Tracker, _ time.Duration, _ func(time.Duration)) {
			ctx := testContext(t)
			const workers = 8
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					kas := fmt.Sprintf("grpc://10.0.1.%d:8155", w)
					for i := range 20 {
						id := int64(i % 4)
						if err := tr.Register(ctx, kas, id); err != nil {
							errs <- err
							return
						}
						if _, err := tr.KasURLs(ctx, id); err != nil {
							errs <- err
							return
						}
						if err := tr.Refresh(ctx, kas, []int64{0, 1, 2, 3}); err != nil {
							errs <- err
							return
						}
					}
					for id := range int64(4) {
						if err := tr.Unregister(ctx, kas, id); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			// Every operation is bounded (the context, the Redis op timeout), so this wait is too.
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for id := range int64(4) {
				wantKas(t, ctx, tr, id)
			}
		}},
	}
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					tr, ttl, advance := im.new(t)
					tc.run(t, tr, ttl, advance)
				})
			}
		})
	}
}

func TestRedisKeyIsReadable(t *testing.T) {
	srv := testredis.Start(t)
	ctx := testContext(t)
	r := newRedis(t, tracker.RedisConfig{Address: srv.Addr(), KeyPrefix: "test:agent:"})
	raw := newRawClient(t, srv.Addr())

	before := time.Now()
	mustNil(t, r.Register(ctx, kasA, 42))
	after := time.Now()

	fields, err := raw.HGetAll(ctx, "test:agent:42").Result()
	mustNil(t, err)
	if len(fields) != 1 {
		t.Fatalf("HGETALL test:agent:42 = %v, want one field %q", fields, kasA)
	}
	v, ok := fields[kasA]
	if !ok {
		t.Fatalf("HGETALL test:agent:42 = %v, want field %q", fields, kasA)
	}
	exp, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("value %q is not unix milliseconds: %v", v, err)
	}
	lo, hi := before.Add(tracker.DefaultTTL).UnixMilli(), after.Add(tracker.DefaultTTL).UnixMilli()
	if exp < lo || exp > hi {
		t.Fatalf("expiry %d not within [%d, %d] (now + DefaultTTL)", exp, lo, hi)
	}
	pttl, err := raw.PTTL(ctx, "test:agent:42").Result()
	mustNil(t, err)
	if pttl <= 0 || pttl > tracker.DefaultTTL {
		t.Fatalf("PTTL = %v, want in (0, %v]", pttl, tracker.DefaultTTL)
	}
}

func TestRedisDefaultKeyPrefix(t *testing.T) {
	srv := testredis.Start(t)
	ctx := testContext(t)
	r := newRedis(t, tracker.RedisConfig{Address: srv.Addr()})
	raw := newRawClient(t, srv.Addr())
	mustNil(t, r.Refresh(ctx, kasA, []int64{7, 8}))
	keys, err := raw.Keys(ctx, "*").Result()
	mustNil(t, err)
	slices.Sort(keys)
	want := []string{tracker.DefaultKeyPrefix + "7", tracker.DefaultKeyPrefix + "8"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys = %q, want %q", keys, want)
	}
	for _, k := range keys {
		pttl, err := raw.PTTL(ctx, k).Result()
		mustNil(t, err)
		if pttl <= 0 {
			t.Fatalf("Refresh left %s without an expiry (PTTL %v)", k, pttl)
		}
	}
}

func TestRedisKeyOfDeadAgentVanishes(t *testing.T) {
	srv := testredis.Start(t)
	ctx := testContext(t)
	const ttl = 300 * time.Millisecond
	r := newRedis(t, tracker.RedisConfig{Address: srv.Addr(), TTL: ttl, RefreshPeriod: ttl / 2})
	raw := newRawClient(t, srv.Addr())
	key := tracker.DefaultKeyPrefix + "5"

	registered := time.Now()
	mustNil(t, r.Register(ctx, kasA, 5))
	// Nobody reads the key: Redis itself must remove it.
	for {
		n, err := raw.Exists(ctx, key).Result()
		mustNil(t, err)
		if n == 0 {
			break
		}
		if time.Since(registered) > testTimeout {
			t.Fatalf("%s still exists %v after registering with TTL %v", key, testTimeout, ttl)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if since := time.Since(registered); since < ttl-50*time.Millisecond {
		t.Fatalf("%s vanished after %v, before the TTL %v", key, since, ttl)
	}
}

func TestRedisKasURLsDeletesExpiredFields(t *testing.T) {
	srv := testredis.Start(t)
	ctx := testContext(t)
	r := newRedis(t, tracker.RedisConfig{Address: srv.Addr(), TTL: redisTTL, RefreshPeriod: redisTTL / 2})
	raw := newRawClient(t, srv.Addr())
	key := tracker.DefaultKeyPrefix + "1"

	mustNil(t, r.Register(ctx, kasA, 1))
	time.Sleep(redisTTL * 6 / 10)
	mustNil(t, r.Register(ctx, kasB, 1)) // keeps the key alive past kasA's record
	time.Sleep(redisTTL * 6 / 10)

	fields, err := raw.HKeys(ctx, key).Result()
	mustNil(t, err)
	if !slices.Contains(fields, kasA) {
		t.Fatalf("the expired field is already gone (fields %q); the test proves nothing", fields)
	}
	wantKas(t, ctx, r, 1, kasB)
	fields, err = raw.HKeys(ctx, key).Result()
	mustNil(t, err)
	if !slices.Equal(fields, []string{kasB}) {
		t.Fatalf("fields after KasURLs = %q, want only %q", fields, kasB)
	}
}

func TestRedisKasURLsKeepsValuesItDoesNotUnderstand(t *testing.T) {
	srv := testredis.Start(t)
	ctx := testContext(t)
	r := newRedis(t, tracker.RedisConfig{Address: srv.Addr()})
	raw := newRawClient(t, srv.Addr())
	key := tracker.DefaultKeyPrefix + "1"

	mustNil(t, raw.HSet(ctx, key, kasC, "v2:something-newer").Err())
	mustNil(t, r.Register(ctx, kasA, 1))
	wantKas(t, ctx, r, 1, kasA)
	v, err := raw.HGet(ctx, key, kasC).Result()
	mustNil(t, err)
	if v != "v2:something-newer" {
		t.Fatalf("foreign value changed to %q", v)
	}
}

func TestRedisConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  tracker.RedisConfig
		want []string // substrings of the error; none means valid
	}{
		{"defaults", tracker.RedisConfig{Address: "localhost:6379"}, nil},
		{"short TTL and refresh", tracker.RedisConfig{Address: "a:1", TTL: 300 * time.Millisecond, RefreshPeriod: 100 * time.Millisecond}, nil},
		{"no address", tracker.RedisConfig{}, []string{"redis address is empty"}},
		{"refresh equals TTL", tracker.RedisConfig{Address: "a:1", TTL: time.Minute, RefreshPeriod: time.Minute},
			[]string{"refresh period 1m0s must be below the TTL 1m0s"}},
		{"TTL below default refresh", tracker.RedisConfig{Address: "a:1", TTL: time.Minute},
			[]string{"refresh period 4m0s must be below the TTL 1m0s"}},
		{"negative durations", tracker.RedisConfig{Address: "a:1", TTL: -time.Second, RefreshPeriod: -time.Second, DialTimeout: -1, OpTimeout: -1},
			[]string{"TTL -1s must be at least 1ms", "refresh period -1s must be positive", "dial timeout -1ns must be positive", "operation timeout -1ns must be positive"}},
		{"sub-millisecond TTL", tracker.RedisConfig{Address: "a:1", TTL: time.Microsecond, RefreshPeriod: time.Nanosecond},
			[]string{"TTL 1µs must be at least 1ms"}},
		{"every problem at once", tracker.RedisConfig{Password: "x", PasswordFile: "/p", TTL: time.Second, RefreshPeriod: 2 * time.Second},
			[]string{"address is empty", "either the redis password or the redis password file", "refresh period 2s must be below the TTL 1s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			_, newErr := tracker.NewRedis(tc.cfg)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if newErr != nil {
					t.Fatalf("NewRedis: %v", newErr)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v", tc.cfg)
			}
			if newErr == nil || newErr.Error() != err.Error() {
				t.Fatalf("NewRedis error %v, want the Validate error %v", newErr, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestRedisConfigDefaults(t *testing.T) {
	r := newRedis(t, tracker.RedisConfig{Address: "127.0.0.1:1", Password: "secret"})
	cfg := r.Config()
	if cfg.KeyPrefix != tracker.DefaultKeyPrefix || cfg.TTL != tracker.DefaultTTL || cfg.RefreshPeriod != tracker.DefaultRefreshPeriod ||
		cfg.DialTimeout != tracker.DefaultDialTimeout || cfg.OpTimeout != tracker.DefaultOpTimeout {
		t.Fatalf("Config() = %+v, want the defaults", cfg)
	}
	if cfg.Password != "" {
		t.Fatal("Config() exposes the password")
	}
	if r.RefreshPeriod() != tracker.DefaultRefreshPeriod || r.TTL() != tracker.DefaultTTL {
		t.Fatalf("RefreshPeriod() = %v, TTL() = %v, want the defaults", r.RefreshPeriod(), r.TTL())
	}
}

func TestRedisPassword(t *testing.T) {
	srv := testredis.Start(t)
	ctx := testContext(t)
	mustNil(t, newRawClient(t, srv.Addr()).ConfigSet(ctx, "requirepass", "s3cret").Err())
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		mustNil(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	base := tracker.RedisConfig{Address: srv.Addr(), OpTimeout: time.Second}

	t.Run("file with trailing newline", func(t *testing.T) {
		cfg := base
		cfg.PasswordFile = write("good", "s3cret\n")
		r := newRedis(t, cfg)
		mustNil(t, r.Register(ctx, kasA, 1))
		wantKas(t, ctx, r, 1, kasA)
	})
	t.Run("inline", func(t *testing.T) {
		cfg := base
		cfg.Password = "s3cret"
		mustNil(t, newRedis(t, cfg).Register(ctx, kasA, 1))
	})
	t.Run("wrong", func(t *testing.T) {
		cfg := base
		cfg.PasswordFile = write("bad", "nope\n")
		if err := newRedis(t, cfg).Register(ctx, kasA, 1); err == nil {
			t.Fatal("Register with a wrong password succeeded")
		}
	})
	t.Run("none", func(t *testing.T) {
		if err := newRedis(t, base).Register(ctx, kasA, 1); err == nil {
			t.Fatal("Register without a password succeeded")
		}
	})
	t.Run("missing file", func(t *testing.T) {
		cfg := base
		cfg.PasswordFile = filepath.Join(dir, "missing")
		if _, err := tracker.NewRedis(cfg); err == nil || !strings.Contains(err.Error(), "read redis password file") {
			t.Fatalf("NewRedis with a missing password file: %v", err)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		cfg := base
		cfg.PasswordFile = write("empty", "\n")
		if _, err := tracker.NewRedis(cfg); err == nil || !strings.Contains(err.Error(), "is empty") {
			t.Fatalf("NewRedis with an empty password file: %v", err)
		}
	})
}

// returnsWithin runs op and fails the test if it does not return within bound. The bound is generous: it
// tells a bounded operation from a hang, not fast from slow.
func returnsWithin(t *testing.T, bound time.Duration, name string, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- op() }()
	select {
	case err := <-done:
		t.Logf("%s returned after %v: %v", name, time.Since(start).Round(time.Millisecond), err)
		return err
	case <-time.After(bound):
		t.Fatalf("%s did not return within %v", name, bound)
		return nil
	}
}

// allOps runs every tracker operation and returns their errors by name.
func allOps(t *testing.T, ctx context.Context, tr tracker.Tracker, bound time.Duration) map[string]error {
	t.Helper()
	return map[string]error{
		"Register":   returnsWithin(t, bound, "Register", func() error { return tr.Register(ctx, kasA, 1) }),
		"Refresh":    returnsWithin(t, bound, "Refresh", func() error { return tr.Refresh(ctx, kasA, []int64{1, 2}) }),
		"KasURLs":    returnsWithin(t, bound, "KasURLs", func() error { _, err := tr.KasURLs(ctx, 1); return err }),
		"Unregister": returnsWithin(t, bound, "Unregister", func() error { return tr.Unregister(ctx, kasA, 1) }),
	}
}

func TestRedisDownAndBack(t *testing.T) {
	srv := testredis.Start(t)
	ctx := testContext(t)
	const opTimeout = 500 * time.Millisecond
	r := newRedis(t, tracker.RedisConfig{Address: srv.Addr(), OpTimeout: opTimeout, DialTimeout: opTimeout})
	mustNil(t, r.Register(ctx, kasA, 1)) // the pool holds a connection that the stop breaks

	srv.Stop()
	for name, err := range allOps(t, ctx, r, 10*opTimeout) {
		if err == nil {
			t.Errorf("%s succeeded while Redis is down", name)
		}
	}

	// A long outage: enough failed dials (go-redis's default pool size, 10 per GOMAXPROCS) to open
	// go-redis's dial circuit breaker, which must close again once Redis is back.
	failures := 10*runtime.GOMAXPROCS(0) + 10
	bound := time.Duration(failures) * opTimeout
	start := time.Now()
	for i := range failures {
		if _, err := r.KasURLs(ctx, 1); err == nil {
			t.Fatalf("KasURLs %d succeeded while Redis is down", i)
		}
		if time.Since(start) > bound {
			t.Fatalf("%d KasURLs against a stopped Redis took more than %v", failures, bound)
		}
	}
	t.Logf("%d KasURLs against a stopped Redis took %v", failures, time.Since(start).Round(time.Millisecond))
	ctx = testContext(t) // a fresh budget for the recovery

	srv.Restart()
	// go-redis notices that Redis is back on the next dial, or within a second when its breaker is open.
	deadline := time.Now().Add(testTimeout)
	for {
		err := r.Register(ctx, kasA, 1)
		if err == nil {
			_, err = r.KasURLs(ctx, 1)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tracker still fails %v after Redis came back: %v", testTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The restarted Redis is empty; the kas's register and refresh put its records back.
	wantKas(t, ctx, r, 1, kasA)
	for name, err := range allOps(t, ctx, r, 10*opTimeout) {
		if err != nil {
			t.Errorf("%s after Redis came back: %v", name, err)
		}
	}
}

// blackHole accepts connections and never answers, like a Redis behind a dead network path.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	mustNil(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func TestRedisBlackHoleIsBounded(t *testing.T) {
	addr := blackHole(t)
	ctx := testContext(t)
	const opTimeout = 300 * time.Millisecond
	r := newRedis(t, tracker.RedisConfig{Address: addr, OpTimeout: opTimeout})
	for name, err := range allOps(t, ctx, r, 10*opTimeout) {
		if err == nil {
			t.Errorf("%s succeeded against a black hole", name)
		}
	}
}

func TestSetRedisLogger(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	h := slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug})
	tracker.SetRedisLogger(slog.New(h))
	t.Cleanup(func() { tracker.SetRedisLogger(slog.New(slog.DiscardHandler)) })

	srv := testredis.Start(t)
	addr := srv.Addr()
	srv.Stop()
	r := newRedis(t, tracker.RedisConfig{Address: addr, OpTimeout: time.Second})
	if err := r.Register(testContext(t), kasA, 1); err == nil {
		t.Fatal("Register succeeded while Redis is down")
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "level=DEBUG") || !strings.Contains(buf.String(), "component=go-redis") {
		t.Fatalf("go-redis did not log through slog at debug level: %q", buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestRedisHonoursCallerContext(t *testing.T) {
	addr := blackHole(t)
	r := newRedis(t, tracker.RedisConfig{Address: addr, OpTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	for name, err := range allOps(t, ctx, r, testTimeout) {
		if err == nil {
			t.Errorf("%s succeeded against a black hole", name)
		}
	}
}
