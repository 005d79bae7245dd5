// Package directory is this kas's side of the tracker, the directory of which kas holds tunnels for
// which agent: it publishes the agents this kas holds (registering, refreshing and unregistering
// them) and watches, for calls that wait, which kas hold an agent. It never blocks the registry or a
// call on the tracker: tracker operations run in its own goroutines, and failures are retried, counted
// and logged at a bounded rate.
package directory

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/tunnelbench/tunnelbench/core/tracker"
)

// Defaults.
const (
	// DefaultPollInterval is how often the tracker is asked again while calls wait for an agent.
	DefaultPollInterval = 50 * time.Millisecond
)

// Config configures a Directory.
type Config struct {
	Tracker tracker.Tracker
	// UnregisterDelay: see DefaultUnregisterDelay. Zero means the default.
	UnregisterDelay time.Duration
	// Refresh is how often this kas's records are refreshed (below the tracker's TTL).
	Refresh time.Duration
	// PollInterval is how often a watched agent's kas list is read again; zero means the default.
	PollInterval time.Duration
	Log          *slog.Logger
	// Meter records tracker errors (TrackerErrorsMetric).
	Meter metric.Meter
}

// Directory publishes this kas's agents and watches where other agents are.
type Directory struct {
	reg  *registrar
	poll *poller
}

// New returns a directory; Start publishes, Watch watches.
func New(cfg Config) (*Directory, error) {
	if cfg.UnregisterDelay == 0 {
		cfg.UnregisterDelay = DefaultUnregisterDelay
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = tracker.DefaultRefreshPeriod
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	reg, err := newRegistrar(cfg.Tracker, "", cfg.UnregisterDelay, cfg.Refresh, cfg.Log, cfg.Meter)
	if err != nil {
		return nil, err
	}
	d := &Directory{reg: reg}
	// Failed polls land in the same metric and log as failed registrations.
	d.poll = newPoller(cfg.Tracker, cfg.PollInterval, func(err error) { reg.failed("list", err) })
	return d, nil
}

// OnAgent is the registry's hook: an agent got its first tunnel here (connected) or lost its last one.
// It never waits.
func (d *Directory) OnAgent(agentID int64, connected bool) { d.reg.onAgent(agentID, connected) }

// Watch returns the kas URLs that hold agentID, sent again whenever they change, until stop is called.
func (d *Directory) Watch(agentID int64) (urls <-chan []string, stop func()) {
	return d.poll.subscribe(agentID)
}

// Start publishes this kas, reachable at selfURL.
func (d *Directory) Start(selfURL string) {
	d.reg.url = selfURL
	d.reg.start()
}

// Stop stops publishing and unregisters this kas's agents (bounded by ctx), so that other kas stop
// asking this one at once. Watches go on until Close: calls still finding may use other kas.
func (d *Directory) Stop(ctx context.Context) {
	d.reg.stop(ctx)
}

// Kill stops publishing and leaves the records to expire, as a crash would.
func (d *Directory) Kill() {
	d.reg.kill()
}

// Close ends every watch; call it once no call finds any more.
func (d *Directory) Close() {
	d.poll.close()
}
