package tunclient

import (
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

type backoffState struct {
	cfg  Backoff
	next time.Duration
}

func newBackoffState(cfg Backoff) *backoffState {
	return &backoffState{cfg: cfg, next: cfg.Initial}
}

func (b *backoffState) reset() { b.next = b.cfg.Initial }

// wait returns the next wait and grows the one after it.
func (b *backoffState) wait() time.Duration {
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

// upTo returns a uniformly random duration in [0, d), or 0 when d <= 0.
func upTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}
