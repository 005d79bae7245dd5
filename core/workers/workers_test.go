package workers

import (
	"runtime/metrics"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const bound = 10 * time.Second

// wait fails the test if ch is not closed within bound.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(bound):
		t.Fatalf("%s: not within %v", what, bound)
	}
}

// Every function runs at once, on a goroutine of its own: none waits for another to end, even when
// kept goroutines are idle and busy ones are not.
func TestGoRunsEveryFunctionAtOnce(t *testing.T) {
	p := New()
	for round := range 3 { // the later rounds find kept goroutines idle
		const n = 32
		var started sync.WaitGroup
		started.Add(n)
		release := make(chan struct{})
		allStarted := make(chan struct{})
		var done sync.WaitGroup
		done.Add(n)
		for range n {
			p.Go(func() {
				defer done.Done()
				started.Done()
				<-release // held until all n run at once
			})
		}
		go func() { started.Wait(); close(allStarted) }()
		wait(t, allStarted, "all functions running at once")
		close(release)
		ended := make(chan struct{})
		go func() { done.Wait(); close(ended) }()
		wait(t, ended, "all functions ended")
		t.Logf("round %d: %d functions ran at once", round, n)
	}
}

func goroutinesCreated(t *testing.T) uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatal("this Go has no /sched/goroutines-created metric")
	}
	return s[0].Value.Uint64()
}

// Functions that follow each other run on the goroutine the first one started.
func TestGoReusesAnIdleGoroutine(t *testing.T) {
	p := New()
	const n = 100
	before := goroutinesCreated(t)
	for range n {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		wait(t, done, "function ran")
		time.Sleep(time.Millisecond) // the goroutine waits for more work by now
	}
	created := goroutinesCreated(t) - before
	t.Logf("%d functions one after another started %d goroutines", n, created)
	if created > n/4 {
		t.Errorf("%d functions one after another started %d goroutines: idle ones are not reused", n, created)
	}
}

// Kept goroutines end once idle for IdleTime: goleak, which retries for a few hundred milliseconds,
// finds none left.
func TestIdleGoroutinesEnd(t *testing.T) {
	p := New()
	var done sync.WaitGroup
	done.Add(16)
	release := make(chan struct{})
	for range 16 {
		p.Go(func() { defer done.Done(); <-release })
	}
	close(release)
	done.Wait()
	goleak.VerifyNone(t)
}

// A nil pool keeps nothing: Go is the go statement.
func TestNilPoolRunsOnNewGoroutines(t *testing.T) {
	var p *Pool
	done := make(chan struct{})
	p.Go(func() { close(done) })
	wait(t, done, "function ran")
}

// A pool made inside a test bubble keeps its goroutines there: they wait on the bubble's clock and end
// with it, and the bubble does not hang on them (a pool shared by the whole process did).
func TestPoolInsideASynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New()
		for range 3 {
			done := make(chan struct{})
			p.Go(func() { close(done) })
			<-done
			synctest.Wait() // the goroutine is idle
		}
		time.Sleep(IdleTime) // the bubble's clock: the idle goroutine ends
		synctest.Wait()
	})
}
