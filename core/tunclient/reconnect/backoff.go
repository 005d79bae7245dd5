package reconnect

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff is how long an agent waits before it reconnects after a real error: Initial, growing by Factor
// up to Max, each wait moved by up to ±Jitter of itself.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
	Factor  float64
	Jitter  float64
}

// DefaultBackoff waits 1 s, then ×1.6 each time up to 5 s, ±20%. The cap is what an agent waits, at
// most, after kas comes back from an outage of any length (with 20 s, agents came back 18.6 s after a
// 60 s outage); a tunnel that connected starts again from 1 s.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 5 * time.Second, Factor: 1.6, Jitter: 0.2}

// Validate reports every problem of b in one error, nil when there is none.
func (b Backoff) Validate() error {
	var errs []error
	if b.Initial <= 0 || b.Max < b.Initial {
		errs = append(errs, fmt.Errorf("backoff needs 0 < initial (%s) <= max (%s)", b.Initial, b.Max))
	}
	if b.Factor < 1 {
		errs = append(errs, fmt.Errorf("backoff factor must be at least 1, got %g", b.Factor))
	}
	if b.Jitter < 0 || b.Jitter > 1 {
		errs = append(errs, fmt.Errorf("backoff jitter must be within [0, 1], got %g", b.Jitter))
	}
	return errors.Join(errs...)
}

// State is the backoff of one tunnel's goroutine: the waits of one outage, growing.
type State struct {
	cfg  Backoff
	next time.Duration
}

// NewState starts at cfg.Initial.
func NewState(cfg Backoff) *State {
	return &State{cfg: cfg, next: cfg.Initial}
}

// Reset starts again from Initial: the tunnel connected, its next failure starts a new outage.
func (b *State) Reset() { b.next = b.cfg.Initial }

// Wait returns the next wait and grows the one after it.
func (b *State) Wait() time.Duration {
	d := jittered(b.next, b.cfg.Jitter)
	grown := time.Duration(float64(b.next) * b.cfg.Factor)
	if grown > b.cfg.Max || grown <= 0 {
		grown = b.cfg.Max
	}
	b.next = grown
	return d
}

// jittered moves d by a uniformly random amount within ±jitter×d. A zero or negative range means no
// jitter: never a panic.
func jittered(d time.Duration, jitter float64) time.Duration {
	span := time.Duration(float64(d) * jitter)
	if span <= 0 {
		return d
	}
	return d - span + rand.N(2*span+1)
}

// UpTo returns a uniformly random duration in [0, d), or 0 when d <= 0.
func UpTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}
