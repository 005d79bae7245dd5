// Package procs builds the project's binaries and runs them as separate processes in tests, the way a
// user runs them: real flags, real ports, SIGTERM to stop. It is a thin test wrapper of bench/topology/proc.
// A test that builds or starts processes is in the full tier (testtier): Bin and Start skip it under -short.
//
// It is test support only; production code never imports it.
package procs

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/topology/proc"
	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// bins are the commands of cmd/, built once per test process.
var bins = proc.Binaries{Root: moduleRoot()}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Bin returns the path of a binary of cmd/ (kas, agentk, tunnelbench), built once per test process.
// Under -short it skips the test instead.
func Bin(t testing.TB, name string) string {
	t.Helper()
	testtier.Full(t, "builds ./cmd/... and runs "+name+" as a process")
	p, err := bins.Path(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	a, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Proc is a running process; its output is kept for failure messages.
type Proc = proc.Proc

// Start runs bin with args. The process gets SIGTERM (then SIGKILL after 10 s) when the test ends.
// Under -short it skips the test instead.
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	testtier.Full(t, "runs "+filepath.Base(bin)+" as a process")
	p, err := proc.Start(filepath.Base(bin), bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Logf("%s: %v\n%s", p.Name(), err, p.Output())
		}
	})
	return p
}
