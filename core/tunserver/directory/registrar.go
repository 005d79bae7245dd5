package directory

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/tunnelbench/tunnelbench/core/tracker"
)

// Registrar defaults.
const (
	// DefaultUnregisterDelay keeps an agent registered for a while after its last tunnel went, so that an
	// agent whose tunnels are all busy, or that reconnects, does not flap in the tracker.
	DefaultUnregisterDelay = 5 * time.Second
	// registrarRetry is how soon a failed tracker operation is tried again.
	registrarRetry = time.Second
	// registrarOpTimeout bounds one tracker operation.
	registrarOpTimeout = 2 * time.Second
	// errorLogInterval bounds how often tracker errors are logged, per operation.
	errorLogInterval = 10 * time.Second
	// TrackerErrorsMetric counts failed tracker operations by op.
	TrackerErrorsMetric = "tunnel_tracker_errors"
)

// registrar keeps the tracker in line with the registry: it registers an agent when it gets its first
// tunnel on this kas, unregisters it a while after its last one went, refreshes every record before it
// expires, and retries whatever failed. It runs in its own goroutine: the registry only hands it news.
type registrar struct {
	tr      tracker.Tracker
	url     string
	delay   time.Duration
	refresh time.Duration
	log     *slog.Logger
	errs    metric.Int64Counter

	mu           sync.Mutex
	connected    map[int64]bool
	unregisterAt map[int64]time.Time
	registered   map[int64]bool
	needRefresh  bool
	retryAt      time.Time
	lastLog      map[string]time.Time
	wake         chan struct{}
	done         chan struct{}
	cancel       context.CancelFunc
}

func newRegistrar(tr tracker.Tracker, url string, delay, refresh time.Duration, log *slog.Logger, m metric.Meter) (*registrar, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	errs, err := m.Int64Counter(TrackerErrorsMetric, metric.WithDescription("Tracker operations that failed, by op"))
	if err != nil {
		return nil, err
	}
	for _, op := range []string{"register", "unregister", "refresh", "list"} {
		errs.Add(context.Background(), 0, metric.WithAttributes(attribute.String("op", op)))
	}
	return &registrar{
		tr: tr, url: url, delay: delay, refresh: refresh, log: log, errs: errs,
		connected:    map[int64]bool{},
		unregisterAt: map[int64]time.Time{},
		registered:   map[int64]bool{},
		lastLog:      map[string]time.Time{},
		wake:         make(chan struct{}, 1),
		done:         make(chan struct{}),
	}, nil
}

// onAgent is the registry's hook: it only records the news.
func (r *registrar) onAgent(agentID int64, connected bool) {
	r.mu.Lock()
	if connected {
		r.connected[agentID] = true
		delete(r.unregisterAt, agentID)
	} else {
		delete(r.connected, agentID)
		r.unregisterAt[agentID] = time.Now().Add(r.delay)
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// failed counts a failed operation and logs it, at most once per errorLogInterval per operation. Any
// failure may mean the tracker lost records (a Redis restarted without persistence): refresh ours as soon
// as it answers again rather than at the next period.
func (r *registrar) failed(op string, err error) {
	r.errs.Add(context.Background(), 1, metric.WithAttributes(attribute.String("op", op)))
	r.mu.Lock()
	now := time.Now()
	logIt := now.Sub(r.lastLog[op]) >= errorLogInterval
	if logIt {
		r.lastLog[op] = now
	}
	r.needRefresh = true
	r.mu.Unlock()
	if logIt {
		r.log.Warn("tracker operation failed; retrying (local routing is not affected)", "op", op, "err", err)
	}
}

func (r *registrar) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.run(ctx)
}

func (r *registrar) run(ctx context.Context) {
	defer close(r.done)
	refresh := time.NewTicker(r.refresh)
	defer refresh.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := r.sync(ctx)
		timer.Reset(max(time.Until(next), time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		case <-refresh.C:
			r.mu.Lock()
			r.needRefresh = true
			r.mu.Unlock()
		}
	}
}

// sync does what the tracker lacks and returns when it next needs to run.
func (r *registrar) sync(ctx context.Context) time.Time {
	now := time.Now()
	r.mu.Lock()
	if now.Before(r.retryAt) {
		next := r.retryAt
		r.mu.Unlock()
		return next
	}
	var reg, unreg []int64
	for id := range r.connected {
		if !r.registered[id] {
			reg = append(reg, id)
		}
	}
	next := now.Add(time.Hour)
	for id, at := range r.unregisterAt {
		switch {
		case at.After(now):
			next = minTime(next, at)
		case r.registered[id]:
			unreg = append(unreg, id)
		default:
			delete(r.unregisterAt, id)
		}
	}
	var refresh []int64
	if r.needRefresh {
		for id := range r.registered {
			refresh = append(refresh, id)
		}
	}
	r.mu.Unlock()

	failed := false
	op := func(name string, f func(context.Context) error) bool {
		octx, cancel := context.WithTimeout(ctx, registrarOpTimeout)
		defer cancel()
		if err := f(octx); err != nil {
			if ctx.Err() == nil {
				r.failed(name, err)
			}
			failed = true
			return false
		}
		return true
	}
	for _, id := range reg {
		if op("register", func(c context.Context) error { return r.tr.Register(c, r.url, id) }) {
			r.mu.Lock()
			r.registered[id] = true
			r.mu.Unlock()
		}
	}
	for _, id := range unreg {
		if op("unregister", func(c context.Context) error { return r.tr.Unregister(c, r.url, id) }) {
			r.mu.Lock()
			if !r.connected[id] {
				delete(r.registered, id)
				delete(r.unregisterAt, id)
			}
			r.mu.Unlock()
		}
	}
	if len(refresh) > 0 || r.needsRefresh() {
		if op("refresh", func(c context.Context) error { return r.tr.Refresh(c, r.url, refresh) }) {
			r.mu.Lock()
			r.needRefresh = false
			r.mu.Unlock()
		}
	}
	if failed {
		r.mu.Lock()
		r.retryAt = time.Now().Add(registrarRetry)
		// Whatever the tracker lost while it was failing comes back with the next refresh.
		r.needRefresh = true
		r.mu.Unlock()
		return time.Now().Add(registrarRetry)
	}
	return next
}

func (r *registrar) needsRefresh() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.needRefresh
}

// stop ends the loop and unregisters every agent (bounded by ctx): other kas stop asking this one at
// once instead of after the TTL.
func (r *registrar) stop(ctx context.Context) {
	if !r.kill() {
		return
	}
	r.mu.Lock()
	ids := make([]int64, 0, len(r.registered))
	for id := range r.registered {
		ids = append(ids, id)
	}
	r.registered = map[int64]bool{}
	r.mu.Unlock()
	for _, id := range ids {
		octx, cancel := context.WithTimeout(ctx, registrarOpTimeout)
		err := r.tr.Unregister(octx, r.url, id)
		cancel()
		if err != nil {
			r.failed("unregister", err)
			return // the records expire on their own
		}
	}
}

// kill ends the loop and leaves the records to expire, as a crash would. It reports whether the loop
// was running.
func (r *registrar) kill() bool {
	if r.cancel == nil {
		return false // never started
	}
	r.cancel()
	<-r.done
	return true
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
