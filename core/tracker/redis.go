package tracker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Defaults of RedisConfig; a zero field means its default.
const (
	// DefaultKeyPrefix starts every agent key, so that one Redis can serve other applications (or several
	// tunnelbench clusters, each with its own prefix).
	DefaultKeyPrefix = "tunnelbench:agent:"
	// DefaultDialTimeout bounds one attempt to connect to Redis.
	DefaultDialTimeout = 2 * time.Second
	// DefaultOpTimeout bounds every tracker operation, connecting included: a routing kas asks the tracker
	// on the call path, so a dead or black-holed Redis must cost a bounded delay, never a hang.
	DefaultOpTimeout = 2 * time.Second
)

// RedisConfig configures the Redis tracker. Every kas of a cluster must use the same Address, KeyPrefix and
// TTL: the key-level expiry is set by whoever wrote last.
type RedisConfig struct {
	// Address is the Redis host:port.
	Address string
	// Password authenticates to Redis; empty means no AUTH. At most one of Password and PasswordFile.
	Password string
	// PasswordFile names a file that holds the password (a trailing newline is ignored), so that the
	// password stays out of command lines and environment listings.
	PasswordFile string
	// KeyPrefix starts every agent key; the key is KeyPrefix + decimal agent id.
	KeyPrefix string
	// TTL is how long a record lives without a refresh.
	TTL time.Duration
	// RefreshPeriod is how often kas should call Refresh; it must be below TTL, with room for a slow
	// refresh.
	RefreshPeriod time.Duration
	// DialTimeout bounds one connection attempt.
	DialTimeout time.Duration
	// OpTimeout bounds every operation, whatever the caller's context allows.
	OpTimeout time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c RedisConfig) WithDefaults() RedisConfig {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.RefreshPeriod == 0 {
		c.RefreshPeriod = DefaultRefreshPeriod
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	return c
}

// Validate reports every problem of c (with defaults applied) in one error, or nil.
func (c RedisConfig) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.Address == "" {
		errs = append(errs, errors.New("redis address is empty"))
	}
	if c.Password != "" && c.PasswordFile != "" {
		errs = append(errs, errors.New("set either the redis password or the redis password file, not both"))
	}
	if c.TTL < time.Millisecond {
		// Redis keeps expiries in milliseconds; a shorter TTL would delete records as they are written.
		errs = append(errs, fmt.Errorf("redis TTL %v must be at least 1ms", c.TTL))
	}
	if c.RefreshPeriod < 0 {
		errs = append(errs, fmt.Errorf("redis refresh period %v must be positive", c.RefreshPeriod))
	}
	if c.RefreshPeriod >= c.TTL && c.TTL > 0 && c.RefreshPeriod > 0 {
		errs = append(errs, fmt.Errorf("redis refresh period %v must be below the TTL %v, or records expire between refreshes", c.RefreshPeriod, c.TTL))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("redis dial timeout %v must be positive", c.DialTimeout))
	}
	if c.OpTimeout < 0 {
		errs = append(errs, fmt.Errorf("redis operation timeout %v must be positive", c.OpTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid redis tracker config: %w", errors.Join(errs...))
	}
	return nil
}

// Redis is the tracker for clusters of kas instances: one Redis hash per agent, a field per kas holding
// the record's expiry, so that the records of a kas that crashed expire on their own.
type Redis struct {
	cfg    RedisConfig
	client *redis.Client
}

var _ Tracker = (*Redis)(nil)

// NewRedis validates cfg and returns a tracker that uses it. It does not contact Redis: kas must start
// (and serve its own tunnels) while Redis is down, and every operation connects as needed.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	password := cfg.Password
	if cfg.PasswordFile != "" {
		var err error
		if password, err = readPasswordFile(cfg.PasswordFile); err != nil {
			return nil, err
		}
	}
	client := redis.NewClient(&redis.Options{
		Addr:        cfg.Address,
		Password:    password,
		DialTimeout: cfg.DialTimeout,
		// The caller retries (kas re-registers and refreshes on a timer), so fail fast instead of spending
		// the operation's budget on dial retries; one command retry still hides a connection that Redis
		// closed while it sat in the pool.
		DialerRetries: 1,
		MaxRetries:    1,
		// Socket deadlines follow the operation's context, which carries OpTimeout.
		ContextTimeoutEnabled: true,
		ReadTimeout:           cfg.OpTimeout,
		WriteTimeout:          cfg.OpTimeout,
		PoolTimeout:           cfg.OpTimeout,
		// Maintenance notifications are for managed Redis fail-overs; "auto" would probe for them on every
		// connection and run background workers that this tracker does not need.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	return &Redis{cfg: cfg, client: client}, nil
}

func readPasswordFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("read redis password file: %w", err)
	}
	// Editors and `echo` end files with a newline that is not part of the password.
	password := strings.TrimRight(string(b), "\r\n")
	if password == "" {
		return "", fmt.Errorf("redis password file %s is empty", name)
	}
	return password, nil
}

// Config returns the configuration in use, with defaults applied.
func (r *Redis) Config() RedisConfig {
	c := r.cfg
	c.Password = "" // the config may end up in logs
	return c
}

// RefreshPeriod is how often kas should call Refresh so that its records never expire while it lives.
func (r *Redis) RefreshPeriod() time.Duration { return r.cfg.RefreshPeriod }

// TTL is how long a record lives without a refresh.
func (r *Redis) TTL() time.Duration { return r.cfg.TTL }

// Close closes the connections to Redis; operations after Close fail. After an outage, a dial probe of
// go-redis may outlive Close by a second plus DialTimeout (testredis.VerifyTestMain waits for it).
func (r *Redis) Close() error {
	return r.client.Close()
}

func (r *Redis) key(agentID int64) string {
	return r.cfg.KeyPrefix + strconv.FormatInt(agentID, 10)
}

func (r *Redis) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.cfg.OpTimeout)
}

// setRecord queues the writes of one record. The key-level expiry is what removes agents that nobody
// refreshes any more; the field value lets readers drop one dead kas of an agent that others keep alive.
func (r *Redis) setRecord(ctx context.Context, pipe redis.Pipeliner, kasURL string, agentID int64, expiry int64) {
	key := r.key(agentID)
	pipe.HSet(ctx, key, kasURL, expiry)
	pipe.PExpire(ctx, key, r.cfg.TTL)
}

func (r *Redis) expiry() int64 {
	return time.Now().Add(r.cfg.TTL).UnixMilli()
}

// Register implements Tracker.
func (r *Redis) Register(ctx context.Context, kasURL string, agentID int64) error {
	ctx, cancel := r.opContext(ctx)
	defer cancel()
	// MULTI so that a record never exists without its key-level expiry.
	_, err := r.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		r.setRecord(ctx, pipe, kasURL, agentID, r.expiry())
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis tracker: register agent %d at %s: %w", agentID, kasURL, err)
	}
	return nil
}

// Unregister implements Tracker.
func (r *Redis) Unregister(ctx context.Context, kasURL string, agentID int64) error {
	ctx, cancel := r.opContext(ctx)
	defer cancel()
	if err := r.client.HDel(ctx, r.key(agentID), kasURL).Err(); err != nil {
		return fmt.Errorf("redis tracker: unregister agent %d at %s: %w", agentID, kasURL, err)
	}
	return nil
}

// Refresh implements Tracker. It sends every record in one pipeline: one round trip however many agents
// kas holds. It is not a MULTI: a transaction that large would stall Redis for every other client, and
// a record left without its key expiry by a broken connection gets it back on the next refresh.
func (r *Redis) Refresh(ctx context.Context, kasURL string, agentIDs []int64) error {
	if len(agentIDs) == 0 {
		return nil
	}
	ctx, cancel := r.opContext(ctx)
	defer cancel()
	exp := r.expiry()
	_, err := r.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, id := range agentIDs {
			r.setRecord(ctx, pipe, kasURL, id, exp)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis tracker: refresh %d agents at %s: %w", len(agentIDs), kasURL, err)
	}
	return nil
}

// deleteIfUnchanged removes fields only if they still hold the value the reader saw: between the read
// and the delete, the kas of an expired record may have refreshed it, and that fresh record must stay.
// ARGV holds field, value pairs.
var deleteIfUnchanged = redis.NewScript(`
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    n = n + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return n
`)

// KasURLs implements Tracker. It removes the expired records it comes across; that cleanup is best
// effort, and a failure there does not fail the listing.
func (r *Redis) KasURLs(ctx context.Context, agentID int64) ([]string, error) {
	ctx, cancel := r.opContext(ctx)
	defer cancel()
	key := r.key(agentID)
	fields, err := r.client.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("redis tracker: list kas of agent %d: %w", agentID, err)
	}
	now := time.Now().UnixMilli()
	var urls []string
	var expired []any
	for kasURL, v := range fields {
		exp, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			// Not ours to delete: it may be a newer kas's format during a rolling upgrade. The key expiry
			// removes it if nobody keeps it alive.
			continue
		}
		if exp > now {
			urls = append(urls, kasURL)
		} else {
			expired = append(expired, kasURL, v)
		}
	}
	if len(expired) > 0 {
		_ = deleteIfUnchanged.Run(ctx, r.client, []string{key}, expired...).Err()
	}
	return urls, nil
}
