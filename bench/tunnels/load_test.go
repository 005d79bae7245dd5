package tunnels

import (
	"context"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// TestAdaptersUnderLoad drives 1 MiB calls from 16 callers through every adapter, the case in which a
// peer was seen to freeze: each gives figures without a failed call, or a stall the watchdog stopped
// (never a hang), and then closes without leaking a goroutine, stalled or not.
func TestAdaptersUnderLoad(t *testing.T) {
	testtier.Full(t, "runs seconds of load through every adapter")
	for _, name := range checkedAdapters() {
		t.Run(name, func(t *testing.T) {
			defer verifyNoLeaks(t)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			r, err := Start(ctx, name, Config{Agents: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := r.Close(ctx); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			c := Case{Name: name + "/unary-1MiB/c16", Shape: load.ShapeUnary, Payload: 1 << 20, Concurrency: 16, Duration: time.Second}
			res, err := RunCase(ctx, r, c, Watchdog{StallAfter: 3 * time.Second, DumpDir: t.TempDir()})
			switch {
			case err != nil:
				t.Fatal(err)
			case res.Stall != nil:
				t.Logf("%s: %v", name, res.Stall)
				if res.Stall.Abandoned {
					t.Errorf("%s: the stalled calls did not end when cancelled", name)
				}
			case res.Result.Calls == 0 || res.Result.Errors != 0:
				t.Errorf("%s: %d calls, %d failed (%v)", name, res.Result.Calls, res.Result.Errors, res.Result.ByCode)
			default:
				t.Logf("%s: %d calls, %.0f MB/s", name, res.Result.Calls, res.Result.BytesPerSecond()/1e6)
			}
		})
	}
}
