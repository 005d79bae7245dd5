package tunserver

import (
	"context"
	"reflect"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type callerKey struct{}

// WithCaller returns ctx carrying the authenticated caller of a call, so that the Router can bound
// what one caller holds. CallerAuthInterceptor and kas's HTTP listener set it.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// anonymous is the one caller of a kas without caller authentication (dev mode, in-process callers
// that were not given one).
type anonymous struct{}

// callerOf is the key that a call's caller is counted under.
func callerOf(ctx context.Context) any {
	c, _ := ctx.Value(callerKey{}).(Caller)
	if c == nil || !reflect.TypeOf(c).Comparable() {
		return anonymous{}
	}
	return c
}

// callerWaits counts, per caller, the calls that are finding a tunnel. The count is taken before the
// call is admitted to wait, so one caller token can never hold more than the bound, whatever agent ids
// it asks for.
type callerWaits struct {
	max int
	reg *Registry
	mu  sync.Mutex
	n   map[any]int
}

func newCallerWaits(max int, reg *Registry) *callerWaits {
	return &callerWaits{max: max, reg: reg, n: map[any]int{}}
}

// admit counts one more finding call of ctx's caller, or refuses it with ResourceExhausted. The
// returned key must be given to release once the find is over.
func (w *callerWaits) admit(ctx context.Context) (key any, err error) {
	if w.max <= 0 {
		return nil, nil
	}
	key = callerOf(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.n[key]; n >= w.max {
		w.reg.limitHit(LimitWaitingByCaller)
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
