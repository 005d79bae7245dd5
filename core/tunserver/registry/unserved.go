package registry

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultUnservedGrace is how long a call for a method that the agent's connected tunnels do not serve
// waits before it fails with Unimplemented: long enough for an agent being upgraded to bring a tunnel
// that serves it, short next to the find timeout that an agent that is not connected gets.
const DefaultUnservedGrace = time.Second

// PresenceFunc reports, each time it is called, the agent's presence on this kas for one call's method
// (Registry.Presence bound to the call).
type PresenceFunc func() Presence

// WatchUnserved judges, while a call waits for a tunnel, whether the agent serves its method at all. It
// checks presence when called and then every grace until ctx ends, and calls verdict(true) once two
// checks in a row found the agent here without the method (so at least a grace after the wait began, and
// a grace after the agent connected), verdict(false) when a later check no longer does. verdict runs on
// the caller's goroutine.
func WatchUnserved(ctx context.Context, presence PresenceFunc, grace time.Duration, verdict func(unserved bool)) {
	ticker := time.NewTicker(grace)
	defer ticker.Stop()
	prev, judged := presence() == MethodUnserved, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now := presence() == MethodUnserved
		switch {
		case now && prev && !judged:
			judged = true
			verdict(true)
		case !now && judged:
			judged = false
			verdict(false)
		}
		prev = now
	}
}

// UnservedError is the status of a call that the agent's connected tunnels do not serve.
func UnservedError(agentID int64, fullMethod string, grace time.Duration) error {
	return status.Errorf(codes.Unimplemented,
		"agent %d is connected but does not serve %s: none of its tunnels announced it within %s (--unserved-grace)",
		agentID, fullMethod, grace)
}

var errUnserved = errors.New("unserved")

// GetServed is h.Get that gives up early with unserved (an Unimplemented status, see UnservedError) once
// WatchUnserved finds that the agent is connected to this kas without the method. A grace <= 0 waits as
// h.Get does. It returns after the watch has ended.
func GetServed(ctx context.Context, h Handle, presence PresenceFunc, grace time.Duration, unserved error) (Forwarder, error) {
	if grace <= 0 {
		return h.Get(ctx)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		WatchUnserved(wctx, presence, grace, func(u bool) {
			if u {
				cancel(errUnserved)
			}
		})
	}()
	t, err := h.Get(wctx)
	cancel(nil)
	<-watched
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errUnserved) {
		return nil, unserved
	}
	return t, err
}
