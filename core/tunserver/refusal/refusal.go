// Package refusal logs the peers kas turns away (agents and callers without a valid token, or over a
// limit), at a bounded rate: the first refusal of a kind and reason at once, then at most one line per
// interval, counting those it stands for. It never logs a credential: callers pass reasons and
// identities (peer address, agent id), never what the peer sent.
package refusal

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/peer"
)

// DefaultInterval is the most often one kind of refusal (say, agents with an invalid token) is logged.
const DefaultInterval = 30 * time.Second

// Log logs refusals. A nil *Log logs nothing.
type Log struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	seen map[key]*window
}

// key is one kind of refusal: kinds and reasons are fixed strings, so the map stays small.
type key struct{ who, reason string }

type window struct {
	last    time.Time
	dropped int
}

// New returns a Log writing to log at warning level, at most once per interval (DefaultInterval when
// zero) for each kind of refusal.
func New(log *slog.Logger, interval time.Duration) *Log {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Log{log: log, interval: interval, now: time.Now, seen: map[key]*window{}}
}

// Refused records that kas refused a peer: who is "agent" or "caller", reason a fixed phrase (such as
// "invalid agent token"); attrs add what identifies the peer, never its credentials.
func (l *Log) Refused(who, reason string, attrs ...any) {
	if l == nil {
		return
	}
	l.mu.Lock()
	now := l.now()
	w := l.seen[key{who, reason}]
	if w == nil {
		w = &window{}
		l.seen[key{who, reason}] = w
	}
	if !w.last.IsZero() && now.Sub(w.last) < l.interval {
		w.dropped++
		l.mu.Unlock()
		return
	}
	dropped := w.dropped
	w.last, w.dropped = now, 0
	l.mu.Unlock()
	args := append([]any{"reason", reason}, attrs...)
	args = append(args, "suppressed", dropped, "quiet_for", l.interval.String())
	l.log.Warn("refused "+who, args...)
}

// Peer is the "peer" attribute of a gRPC call's context: the client's address.
func Peer(ctx context.Context) slog.Attr {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return slog.String("peer", p.Addr.String())
	}
	return slog.String("peer", "in-process")
}
