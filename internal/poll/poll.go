// Package poll waits for a condition that nothing signals, checking it at an interval, within a bound.
package poll

import (
	"context"
	"time"
)

// Until checks cond every interval until it holds, and fails with the context's error when ctx ends or
// timeout passes first.
func Until(ctx context.Context, timeout, interval time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
