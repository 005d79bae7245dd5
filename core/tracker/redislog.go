package tracker

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// SetRedisLogger sends the go-redis client's own log lines to logger at debug level. go-redis has one
// process-wide logger that writes to stderr once per failed dial: without this, a Redis outage floods
// stderr however carefully kas rate-limits its own reports of the tracker's errors, which carry the same
// cause. Call it once, at start-up, before NewRedis.
func SetRedisLogger(logger *slog.Logger) {
	redis.SetLogger(redisLog{logger})
}

type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	if !r.l.Enabled(ctx, slog.LevelDebug) {
		return // skip formatting on the hot path of an outage
	}
	r.l.DebugContext(ctx, fmt.Sprintf(format, v...), slog.String("component", "go-redis"))
}
