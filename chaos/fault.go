package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// Change deadlines.
const (
	// DefaultChangeDeadline bounds one fault change (apply or remove) unless a scenario says otherwise.
	DefaultChangeDeadline = 20 * time.Second
	// RollbackDeadline bounds undoing a partly applied fault after Apply failed.
	RollbackDeadline = 5 * time.Second
	// applyParallelism is how many proxies change at once.
	applyParallelism = 16
)

// Fault is a network fault on proxies. Apply and Remove act on one proxy and return when the change
// is in place or ctx ends; use Apply and Remove (the package functions) for a set of proxies.
// A Fault value may be applied to many proxies at once, and applied again after it was removed.
type Fault interface {
	// Type is the name the fault registered under ("latency").
	Type() string
	Apply(ctx context.Context, p *Proxy) error
	Remove(ctx context.Context, p *Proxy) error
}

// Params are a fault's parameters as text (from a scenario file): "latency": "100ms".
type Params map[string]string

// ParamError is a problem with one parameter; Key is empty when the problem is not with one key.
type ParamError struct {
	Key string
	Err error
}

func (e *ParamError) Error() string {
	if e.Key == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s: %v", e.Key, e.Err)
}

func (e *ParamError) Unwrap() error { return e.Err }

// FaultConstructor builds a fault from its params; it reports every problem, each as a *ParamError,
// joined with errors.Join.
type FaultConstructor func(Params) (Fault, error)

var faults = registry[FaultConstructor]{kind: "fault"}

// RegisterFault makes a network fault type available to NewFault. It panics on a duplicate name.
func RegisterFault(typ string, c FaultConstructor) { faults.register(typ, c) }

// FaultTypes lists the registered network fault types, sorted.
func FaultTypes() []string { return faults.names() }

// NewFault builds a network fault of type typ from params. Unknown types and unknown, missing or
// bad params are errors; the problems with params are *ParamError values joined with errors.Join.
func NewFault(typ string, params Params) (Fault, error) {
	c, err := faults.get(typ)
	if err != nil {
		return nil, err
	}
	return c(params)
}

// Apply applies f to every proxy in ps, several at a time, within ctx. It is all or nothing: when a
// proxy fails, f is removed again from those it reached (bounded by RollbackDeadline) and the error
// names every proxy that failed and why.
func Apply(ctx context.Context, f Fault, ps []*Proxy) error {
	done, err := each(ctx, ps, func(ctx context.Context, p *Proxy) error {
		if err := bounded(ctx, func() error { return f.Apply(ctx, p) }); err != nil {
			return fmt.Errorf("apply %s to %s: %w", f.Type(), p, err)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RollbackDeadline)
	defer cancel()
	if rerr := Remove(rctx, f, done); rerr != nil {
		err = errors.Join(err, fmt.Errorf("roll back: %w", rerr))
	}
	return err
}

// Remove removes f from every proxy in ps within ctx; the error names every proxy that failed.
func Remove(ctx context.Context, f Fault, ps []*Proxy) error {
	_, err := each(ctx, ps, func(ctx context.Context, p *Proxy) error {
		if err := bounded(ctx, func() error { return f.Remove(ctx, p) }); err != nil {
			return fmt.Errorf("remove %s from %s: %w", f.Type(), p, err)
		}
		return nil
	})
	return err
}

// each runs fn on every proxy, applyParallelism at a time; it returns the proxies fn succeeded on.
func each(ctx context.Context, ps []*Proxy, fn func(context.Context, *Proxy) error) ([]*Proxy, error) {
	var (
		mu   sync.Mutex
		ok   []*Proxy
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, applyParallelism)
	)
	for _, p := range ps {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := fn(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				ok = append(ok, p)
			}
		})
	}
	wg.Wait()
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return ok, errors.Join(errs...)
}

// bounded runs f and waits for it until ctx ends. Toxiproxy cannot cancel a change, so when ctx
// ends first, f goes on in the background and the error says so.
func bounded(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not started: %w", context.Cause(ctx))
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w (toxiproxy is still busy; the change may complete later)", context.Cause(ctx))
	}
}

// registry maps type names to constructors.
type registry[C any] struct {
	kind string
	mu   sync.RWMutex
	m    map[string]C
}

func (r *registry[C]) register(typ string, c C) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]C)
	}
	if _, dup := r.m[typ]; dup {
		panic(fmt.Sprintf("chaos: %s type %q registered twice", r.kind, typ))
	}
	r.m[typ] = c
}

func (r *registry[C]) get(typ string) (C, error) {
	r.mu.RLock()
	c, ok := r.m[typ]
	r.mu.RUnlock()
	if !ok {
		return c, fmt.Errorf("unknown %s type %q (want one of %s)", r.kind, typ, joinQuoted(r.names()))
	}
	return c, nil
}

func (r *registry[C]) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for n := range r.m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
