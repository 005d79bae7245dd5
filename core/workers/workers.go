// Package workers runs short-lived work on goroutines kept from earlier work: a goroutine whose stack
// has grown to what a call needs serves the next call without growing it again.
//
// It must never hold a goroutine longer than IdleTime after its last work, nor make work wait for a
// worker: Go starts a new goroutine whenever no kept one is idle.
package workers

import "time"

// IdleTime is how long a goroutine waits for more work once it is done. Calls a few milliseconds apart
// (500 HTTP requests/s) reuse one goroutine; an idle process holds none after this long, and tests that
// check for leaked goroutines see them gone well within their retries.
const IdleTime = 50 * time.Millisecond

// Pool keeps the goroutines of one owner (a connection, an agent, a handler), so that work stays with
// whoever started it: a test bubble (testing/synctest) that creates an owner sees every goroutine the
// owner's work runs on, and no other. A nil Pool keeps none: Go is the go statement.
type Pool struct {
	// idle hands work to a goroutine waiting for more. Unbuffered: a send succeeds only into a goroutine
	// that is idle now, so work never waits behind other work.
	idle chan func()
}

// New returns an empty pool.
func New() *Pool {
	return &Pool{idle: make(chan func())}
}

// Go runs f on a goroutine of its own, as the go statement does: a kept idle one when there is one, a new
// one otherwise.
//
// A new goroutine starts with a small stack. A handler that needs more (an HTTP request through kas
// takes three such goroutines, the deepest near 16 KiB) grows it by copying, several times: on this
// project's 2-core machine that was about 11 µs of the 225 µs of CPU an HTTP request cost kas and the
// agent together, beside a goroutine creation per hand-off.
func (p *Pool) Go(f func()) {
	if p == nil {
		go f()
		return
	}
	select {
	case p.idle <- f:
	default:
		go p.work(f)
	}
}

// work runs f, then whatever Go hands it, until it has been idle for IdleTime.
func (p *Pool) work(f func()) {
	var t *time.Timer
	for {
		f()
		f = nil // what it referenced is garbage from now on, not held while idle
		if t == nil {
			t = time.NewTimer(IdleTime)
		} else {
			t.Reset(IdleTime)
		}
		select {
		case f = <-p.idle:
			t.Stop()
		case <-t.C:
			return
		}
	}
}
