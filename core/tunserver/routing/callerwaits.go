package routing

import (
	"context"
	"sync"

	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// callerWaits counts, per caller, the calls that are finding a tunnel. The count is taken before the
// call is admitted to wait, so one caller token can never hold more than the bound, whatever agent ids
// it asks for.
type callerWaits struct {
	max     int
	onLimit tunserver.OnLimit
	mu      sync.Mutex
	n       map[any]int
}

func newCallerWaits(max int, onLimit tunserver.OnLimit) *callerWaits {
	return &callerWaits{max: max, onLimit: onLimit, n: map[any]int{}}
}

// admit counts one more finding call of ctx's caller, or refuses it with ResourceExhausted. The
// returned key must be given to release once the find is over.
func (w *callerWaits) admit(ctx context.Context) (key any, err error) {
	if w.max <= 0 {
		return nil, nil
	}
	key = auth.CallerKey(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.n[key]; n >= w.max {
		w.onLimit.Hit(tunserver.LimitWaitingByCaller)
		return nil, status.Errorf(codes.ResourceExhausted, "this caller already has %d calls waiting for tunnels, the limit (--max-waiting-calls-per-caller) is %d", n, w.max)
	}
	w.n[key]++
	return key, nil
}

// release ends what admit counted; a nil key counted nothing.
func (w *callerWaits) release(key any) {
	if key == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[key]--; w.n[key] <= 0 {
		delete(w.n, key)
	}
}
