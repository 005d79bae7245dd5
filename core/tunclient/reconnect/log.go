package reconnect

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultLogInterval bounds how often an agent that cannot reach kas says so: the first failure
// of an outage, or one with a new reason, is logged at once, then at most one line per interval (each
// counting the failures it stands for), however many tunnels retry.
const DefaultLogInterval = 30 * time.Second

// Log reports, at warning level and rate-limited, why the agent's tunnels cannot connect to kas
// and when they retry, and once at info level when a tunnel connects again. Nothing it logs comes from
// the agent's credentials: reasons are kas's statuses and gRPC's transport errors.
type Log struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	// failing is set from the first failure until a tunnel connects: the hot path (a tunnel that goes
	// back to idle after each call) reads only this.
	failing atomic.Bool

	mu         sync.Mutex
	since      time.Time // the outage's first failure
	total      int       // failures in the outage
	unlogged   int       // failures since the last line
	lastLine   time.Time
	lastReason string
}

// NewLog logs to log, a line per interval at most while the agent cannot connect.
func NewLog(log *slog.Logger, interval time.Duration) *Log {
	return &Log{log: log, interval: interval, now: time.Now}
}

// Failed records a tunnel that could not connect, or broke, and reconnects after retryIn.
func (l *Log) Failed(err error, retryIn time.Duration) {
	reason := failureReason(err)
	l.mu.Lock()
	now := l.now()
	if !l.failing.Load() {
		l.failing.Store(true)
		l.since, l.total = now, 0
	}
	l.total++
	l.unlogged++
	logIt := l.lastLine.IsZero() || now.Sub(l.lastLine) >= l.interval || reason != l.lastReason
	var failures int
	if logIt {
		failures, l.unlogged = l.unlogged, 0
		l.lastLine, l.lastReason = now, reason
	}
	l.mu.Unlock()
	if logIt {
		l.log.Warn("cannot connect to kas, retrying",
			"reason", reason, "code", status.Code(err).String(), "err", status.Convert(err).Message(),
			"retry_in", retryIn.Round(time.Millisecond).String(), "failures", failures, "quiet_for", l.interval.String())
	}
}

// Connected records a tunnel that became idle; after failures it says that the agent is back.
func (l *Log) Connected() {
	if !l.failing.Load() {
		return
	}
	l.mu.Lock()
	if !l.failing.Load() {
		l.mu.Unlock()
		return
	}
	l.failing.Store(false)
	outage, failures := l.now().Sub(l.since), l.total
	// The next outage is logged at once, whatever its reason.
	l.lastLine, l.lastReason, l.unlogged = time.Time{}, "", 0
	l.mu.Unlock()
	l.log.Info("connected to kas again", "after", outage.Round(time.Millisecond).String(), "failures", failures)
}

// Failing reports whether tunnels failed since one last connected.
func (l *Log) Failing() bool { return l.failing.Load() }

// failureReason says in a few words what a failed tunnel means for the person running the agent.
func failureReason(err error) string {
	st := status.Convert(err)
	msg := strings.ToLower(st.Message())
	switch st.Code() {
	case codes.Unauthenticated:
		return "kas refused the agent token (check --token or --token-file)"
	case codes.PermissionDenied:
		return "kas refused the agent"
	case codes.ResourceExhausted:
		return "kas refused the tunnel: a limit of kas"
	case codes.Unavailable:
		switch {
		case strings.Contains(msg, "handshake") || strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:") ||
			strings.Contains(msg, "certificate"):
			return "TLS handshake with kas failed"
		case strings.Contains(msg, "connection refused"):
			return "kas is down or not listening (connection refused)"
		case strings.Contains(msg, "no such host") || strings.Contains(msg, "name resolver"):
			return "kas address does not resolve"
		case strings.Contains(msg, "eof") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "goaway"):
			return "connection to kas lost"
		default:
			return "kas unreachable"
		}
	default:
		return "tunnel to kas failed"
	}
}
