package tunnels

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/load"
)

// Watchdog defaults.
const (
	// DefaultStallAfter: a load in which no call completes for this long is stalled. Every shape's
	// call takes far less on a working tunnel (the longest, 16 × 64 KiB server stream, milliseconds).
	DefaultStallAfter = 10 * time.Second
	// DefaultAbandonAfter bounds how long a stalled load may take to stop once its calls are cancelled.
	DefaultAbandonAfter = 5 * time.Second
)

// Watchdog watches a load for progress.
type Watchdog struct {
	// StallAfter is how long the load may go without a completed call (success or failure); zero means
	// DefaultStallAfter. It must be longer than the load's longest call.
	StallAfter time.Duration
	// AbandonAfter bounds the wait for a stalled load to stop; zero means DefaultAbandonAfter.
	AbandonAfter time.Duration
	// DumpDir receives a stalled load's goroutine dump as NAME.goroutines.txt (NAME the case's name,
	// with every character but letters, digits, dot, dash and underscore turned into _); empty means a
	// new file in the system's temporary directory.
	DumpDir string
}

func (w Watchdog) withDefaults() (Watchdog, error) {
	if w.StallAfter == 0 {
		w.StallAfter = DefaultStallAfter
	}
	if w.AbandonAfter == 0 {
		w.AbandonAfter = DefaultAbandonAfter
	}
	var errs []error
	if w.StallAfter < 0 {
		errs = append(errs, fmt.Errorf("stall bound must be positive, got %v", w.StallAfter))
	}
	if w.AbandonAfter < 0 {
		errs = append(errs, fmt.Errorf("abandon bound must be positive, got %v", w.AbandonAfter))
	}
	return w, errors.Join(errs...)
}

// Stall is a load that stopped completing calls.
type Stall struct {
	// After is how long no call had completed when the watchdog gave up.
	After time.Duration `json:"after"`
	// Completed is how many calls completed before (warm-up included).
	Completed int64 `json:"completed"`
	// DumpPath is the goroutine dump taken at the stall (runtime/pprof, debug=2).
	DumpPath string `json:"dump_path"`
	// Abandoned says that the load's calls had not all returned within Watchdog.AbandonAfter of being
	// cancelled: their goroutines were left running (closing the tunnel usually ends them).
	Abandoned bool `json:"abandoned,omitempty"`
}

func (s *Stall) Error() string {
	msg := fmt.Sprintf("stalled: no call completed for %v after %d calls; goroutines in %s", s.After, s.Completed, s.DumpPath)
	if s.Abandoned {
		msg += "; calls still running, abandoned"
	}
	return msg
}

// errStalled is the cause a stalled load's context is cancelled with.
var errStalled = errors.New("tunnel stalled")

// RunWatched runs gen on newCall's calls, watched by w. A load that stops completing calls is
// cancelled and returned as a Stall (and a nil result) within StallAfter + StallAfter/4 +
// AbandonAfter; err is for everything else (a bad generator, ctx ended, the dump not written).
func RunWatched(ctx context.Context, name string, gen load.Generator, newCall load.NewCall, w Watchdog) (*load.Result, *Stall, error) {
	w, err := w.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	var completed atomic.Int64
	counted := func() load.Call {
		call := newCall()
		return func(ctx context.Context) (int, error) {
			n, err := call(ctx)
			completed.Add(1)
			return n, err
		}
	}
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type outcome struct {
		res *load.Result
		err error
	}
	done := make(chan outcome, 1) // buffered: an abandoned load still ends without a reader
	go func() {
		res, err := gen.Run(lctx, counted)
		done <- outcome{res, err}
	}()
	tick := time.NewTicker(w.StallAfter / 4)
	defer tick.Stop()
	last, lastAt := int64(0), time.Now()
	for {
		select {
		case o := <-done:
			return o.res, nil, o.err
		case now := <-tick.C:
			if n := completed.Load(); n != last {
				last, lastAt = n, now
				continue
			}
			if now.Sub(lastAt) < w.StallAfter {
				continue
			}
			stall := &Stall{After: now.Sub(lastAt), Completed: last}
			// The dump comes first, while the stuck goroutines are still where they stopped.
			var dumpErr error
			stall.DumpPath, dumpErr = writeGoroutineDump(w.DumpDir, name)
			cancel(errStalled)
			select {
			case <-done:
			case <-time.After(w.AbandonAfter):
				stall.Abandoned = true
			}
			if dumpErr != nil {
				dumpErr = fmt.Errorf("%s: goroutine dump: %w", name, dumpErr)
			}
			return nil, stall, dumpErr
		}
	}
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// writeGoroutineDump writes every goroutine's stack (pprof's debug=2, the panic format) to a file
// named after name in dir, or to a new temporary file when dir is empty, and returns its path.
// dumpSuffix ends the name of every goroutine dump a watchdog writes.
const dumpSuffix = ".goroutines.txt"

// ClearDumps removes the goroutine dumps an earlier run left in dir (files ending in .goroutines.txt,
// nothing else), so that a results directory shows this run's stalls only. A missing dir is no error.
func ClearDumps(dir string) error {
	if dir == "" {
		return nil
	}
	old, err := filepath.Glob(filepath.Join(dir, "*"+dumpSuffix))
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range old {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func writeGoroutineDump(dir, name string) (string, error) {
	base := unsafeFileChars.ReplaceAllString(name, "_")
	var f *os.File
	var err error
	if dir == "" {
		f, err = os.CreateTemp("", base+"-*"+dumpSuffix)
	} else {
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		f, err = os.Create(filepath.Join(dir, base+dumpSuffix))
	}
	if err != nil {
		return "", err
	}
	werr := pprof.Lookup("goroutine").WriteTo(f, 2)
	return f.Name(), errors.Join(werr, f.Close())
}
