package tunnels

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/core/demo"
)

// TestRunCase runs cases through the trivial adapter of trivial_adapter_test.go, found by its name,
// as a run of the harness does: the interface alone carries the load.
func TestRunCase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	r, err := Start(ctx, trivialName, Config{Agents: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	for _, c := range []Case{
		{Name: "unary-64B/c2", Shape: load.ShapeUnary, Payload: 64, Concurrency: 2, Duration: 100 * time.Millisecond, Agent: 2},
		{Name: "bidi-1KiB/c1", Shape: load.ShapeBidi, Payload: 1 << 10, Concurrency: 1, Warmup: 20 * time.Millisecond, Duration: 100 * time.Millisecond},
	} {
		res, err := RunCase(ctx, r, c, Watchdog{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stall != nil || res.Result == nil {
			t.Fatalf("%s: stall %v, result %v", c.Name, res.Stall, res.Result)
		}
		if res.Result.Calls == 0 || res.Result.Errors != 0 || res.Result.Latency.TotalCount() != res.Result.Calls {
			t.Errorf("%s: %d calls, %d errors, %d latencies", c.Name, res.Result.Calls, res.Result.Errors, res.Result.Latency.TotalCount())
		}
	}
}

// freezer makes an agent stop answering: a frozen demo service holds every Echo, deaf to its
// caller's cancellation, until thawed, as a tunnel that stops moving data would.
type freezer struct {
	frozen atomic.Bool
	mu     sync.Mutex
	thawed chan struct{}
}

func newFreezer() *freezer { return &freezer{thawed: make(chan struct{})} }

func (f *freezer) freeze() { f.frozen.Store(true) }

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen.Swap(false) {
		close(f.thawed)
		f.thawed = make(chan struct{})
	}
}

func (f *freezer) holdWhileFrozen() {
	f.mu.Lock()
	thawed := f.thawed
	f.mu.Unlock()
	if f.frozen.Load() {
		<-thawed
	}
}

type frozenDemo struct {
	demo.Server
	f *freezer
}

func (s frozenDemo) Echo(ctx context.Context, req *demo.EchoRequest) (*demo.EchoResponse, error) {
	s.f.holdWhileFrozen()
	return s.Server.Echo(ctx, req)
}

// TestRunCaseStall: an agent that stops answering under load makes the case a stall with a goroutine
// dump that shows where it stopped; the load ends, and the next case runs on the same tunnel.
func TestRunCaseStall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f := newFreezer()
	defer f.thaw()
	r, err := Start(ctx, trivialName, Config{Agents: 1, Register: func(_ int64, s grpc.ServiceRegistrar) {
		demo.RegisterDemoServer(s, frozenDemo{f: f})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	dir := t.TempDir()
	f.freeze()
	// Only the watchdog ends this case: its duration is the test's whole budget.
	stalled := Case{Name: "frozen/unary-64B/c4", Shape: load.ShapeUnary, Payload: 64, Concurrency: 4, Duration: testTimeout}
	res, err := RunCase(ctx, r, stalled, Watchdog{StallAfter: 200 * time.Millisecond, DumpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stall == nil || res.Result != nil {
		t.Fatalf("frozen agent: stall %v, result %v; want a stall and no figures", res.Stall, res.Result)
	}
	if res.Stall.Completed != 0 || res.Stall.Abandoned {
		t.Errorf("stall %+v: want no completed call, and the load stopped (gRPC calls end when cancelled)", res.Stall)
	}
	if want := filepath.Join(dir, "frozen_unary-64B_c4.goroutines.txt"); res.Stall.DumpPath != want {
		t.Errorf("dump at %s, want %s", res.Stall.DumpPath, want)
	}
	dump, err := os.ReadFile(res.Stall.DumpPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dump), "holdWhileFrozen") {
		t.Errorf("the dump does not show the frozen handlers:\n%.2000s", dump)
	}
	if !strings.Contains(res.Stall.Error(), res.Stall.DumpPath) {
		t.Errorf("stall message %q does not name the dump", res.Stall.Error())
	}

	f.thaw()
	next := Case{Name: "thawed/unary-64B/c4", Shape: load.ShapeUnary, Payload: 64, Concurrency: 4, Duration: 100 * time.Millisecond}
	res, err = RunCase(ctx, r, next, Watchdog{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stall != nil || res.Result == nil || res.Result.Calls == 0 || res.Result.Errors != 0 {
		t.Fatalf("the case after the stall: stall %v, result %+v", res.Stall, res.Result)
	}
}

// TestRunWatchedAbandons: calls deaf to cancellation cannot hold the run: the watchdog gives up on
// them after its bound and says so; they end when what holds them lets go.
func TestRunWatchedAbandons(t *testing.T) {
	release := make(chan struct{})
	newCall := func() load.Call {
		return func(context.Context) (int, error) {
			<-release
			return 0, nil
		}
	}
	gen := load.ClosedLoop{Workers: 2, Duration: testTimeout}
	res, stall, err := RunWatched(context.Background(), "deaf", gen, newCall, Watchdog{StallAfter: 100 * time.Millisecond, AbandonAfter: 100 * time.Millisecond, DumpDir: t.TempDir()})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if res != nil || stall == nil || !stall.Abandoned {
		t.Fatalf("deaf calls: result %v, stall %+v; want an abandoned stall", res, stall)
	}
	if !strings.Contains(stall.Error(), "abandoned") {
		t.Errorf("stall message %q does not say the calls were abandoned", stall.Error())
	}
	verifyNoLeaks(t)
}

// TestRunWatchedDumpError: a dump that cannot be written is an error, and the stall is still reported.
func TestRunWatchedDumpError(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	newCall := func() load.Call {
		return func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		}
	}
	gen := load.ClosedLoop{Workers: 1, Duration: testTimeout}
	_, stall, err := RunWatched(context.Background(), "x", gen, newCall, Watchdog{StallAfter: 100 * time.Millisecond, DumpDir: notADir})
	if stall == nil || err == nil || !strings.Contains(err.Error(), "goroutine dump") {
		t.Fatalf("stall %+v, err %v; want the stall and an error about the dump", stall, err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		run  func() error
		want []string
	}{
		{"no agents", func() error { _, err := Start(ctx, Direct, Config{}); return err }, []string{"agents must be between 1 and"}},
		{"unknown tunnel", func() error { _, err := Start(ctx, "nope", Config{Agents: 1}); return err }, []string{`unknown tunnel "nope"`, Direct}},
		{"bad case", func() error {
			_, err := RunCase(ctx, nil, Case{Name: "c", Shape: "zigzag", Payload: -1, Duration: -1}, Watchdog{})
			return err
		}, []string{"case c", `unknown shape "zigzag"`, "payload must not be negative", "concurrency must be at least 1", "duration must be positive"}},
		{"bad watchdog", func() error {
			_, _, err := RunWatched(ctx, "w", load.ClosedLoop{Workers: 1, Duration: time.Second}, nil, Watchdog{StallAfter: -1, AbandonAfter: -1})
			return err
		}, []string{"stall bound must be positive", "abandon bound must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
