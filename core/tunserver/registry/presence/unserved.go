package presence

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

// WatchUnserved judges, while call waits for a tunnel, whether the agent serves its method at all. It
// asks src when called and then every grace until ctx ends, and calls verdict(true) once two checks in a
// row found the agent here without the method (so at least a grace after the wait began, and a grace
// after the agent connected), verdict(false) when a later check no longer does. verdict runs on the
// caller's goroutine.
func WatchUnserved(ctx context.Context, src Source, call Call, grace time.Duration, verdict func(unserved bool)) {
	ticker := time.NewTicker(grace)
	defer ticker.Stop()
	prev, judged := call.unserved(src), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now := call.unserved(src)
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

// Getter is a call's wait for a tunnel: a registry.Handle.
type Getter[T any] interface {
	Get(ctx context.Context) (T, error)
}

// GetServed is h.Get that gives up early with unserved (an Unimplemented status, see UnservedError) once
// WatchUnserved finds that the agent is connected to this kas without the method. A grace <= 0 waits as
// h.Get does. It returns after the watch has ended.
func GetServed[T any](ctx context.Context, h Getter[T], src Source, call Call, grace time.Duration, unserved error) (T, error) {
	if grace <= 0 {
		return h.Get(ctx)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		WatchUnserved(wctx, src, call, grace, func(u bool) {
			if u {
				cancel(errUnserved)
			}
		})
	}()
	t, err := h.Get(wctx)
	cancel(nil)
	<-watched
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errUnserved) {
		var none T
		return none, unserved
	}
	return t, err
}
