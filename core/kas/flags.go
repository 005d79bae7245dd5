package kas

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

const usage = `
kas accepts tunnels from agents (agentk) and routes gRPC calls to them.

Callers pick the agent with the metadata "kas-hop-routing-agent-id: <id>", for example:
  grpcurl -plaintext -H 'kas-hop-routing-agent-id: 1' 127.0.0.1:8153 list

Usage: kas [flags]
`

// ParseArgs builds a Config from kas's command line and the files it names. Problems come back as
// cli.UsageError; --help prints the usage to stdout and returns cli.ErrHelp.
func ParseArgs(args []string, stdout, logOut io.Writer) (Config, error) {
	fs := flag.NewFlagSet("kas", flag.ContinueOnError)
	cli.SetUsage(fs, usage)
	var cfg Config
	fs.StringVar(&cfg.AgentListen, "agent-listen", DefaultAgentListen, "address for agent connections (the agent API)")
	fs.StringVar(&cfg.APIListen, "api-listen", DefaultAPIListen, "address of the public gRPC API that routes calls to agents; empty disables it")
	fs.StringVar(&cfg.PrivateListen, "private-listen", DefaultPrivateListen, "address of the private API for other kas instances; empty disables it")
	fs.StringVar(&cfg.HTTPListen, "http-listen", httptunnel.DefaultListen, "address serving HTTP to agents: /agents/{id}/{path} goes to that agent's --http-upstream; empty disables it")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", DefaultMetricsListen, "address serving /metrics, /healthz and /readyz; empty disables it")
	tokens := &cli.KeyValues{Form: "ID=TOKEN"}
	fs.Var(tokens, "agent-token", "an agent `ID=TOKEN` allowed to connect (repeatable)")
	tokensFile := fs.String("agent-tokens-file", "", "`FILE` with one ID=TOKEN per line ('#' starts a comment)")
	fs.DurationVar(&cfg.FindTimeout, "tunnel-find-timeout", tunserver.DefaultFindTimeout, "how long a call may wait for a tunnel to its agent")
	fs.DurationVar(&cfg.MaxConnectionAge, "max-connection-age", DefaultMaxConnectionAge, "age at which agent connections are rotated (0 disables rotation)")
	fs.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", DefaultShutdownGrace, "how long calls in flight may run after SIGTERM")
	fs.IntVar(&cfg.MaxMessageSize, "max-message-size", DefaultMaxMessageSize, "largest routed message in bytes")
	fs.StringVar(&cfg.PrivateURL, "private-url", "", "URL other kas instances reach this one at, such as grpc://10.0.0.5:8155 (default: grpc:// and the --private-listen address)")
	secretFile := fs.String("private-api-secret-file", "", "`FILE` with the secret (at least 32 bytes) every kas of a deployment shares; needed for several replicas")
	redisAddr := fs.String("redis-address", "", "Redis host:port of the tracker that lets several kas replicas find each other's tunnels; empty: this kas is alone")
	redisPrefix := fs.String("redis-key-prefix", tracker.DefaultKeyPrefix, "prefix of the tracker's Redis keys (one hash per agent: prefix + agent id)")
	redisPasswordFile := fs.String("redis-password-file", "", "`FILE` with the Redis password")
	trackerRefresh := fs.Duration("tracker-refresh-period", tracker.DefaultRefreshPeriod, "how often this kas refreshes its tracker records")
	trackerTTL := fs.Duration("tracker-ttl", tracker.DefaultTTL, "how long a tracker record lives without a refresh (a crashed kas disappears after this)")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", "export routing spans over OTLP/gRPC to this `HOST:PORT` (plaintext); empty: no tracing")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return Config{}, err
	}
	var errs []error
	m, err := agentTokens(tokens, *tokensFile)
	if err != nil {
		errs = append(errs, err)
	} else if len(m) == 0 {
		errs = append(errs, errors.New("no agent tokens: give --agent-token ID=TOKEN or --agent-tokens-file"))
	}
	if cfg.FindTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--tunnel-find-timeout must be positive, got %s", cfg.FindTimeout))
	}
	if cfg.MaxConnectionAge < 0 {
		errs = append(errs, fmt.Errorf("--max-connection-age must not be negative, got %s", cfg.MaxConnectionAge))
	}
	if cfg.MaxConnectionAge == 0 {
		cfg.MaxConnectionAge = -1 // Config: negative disables
	}
	if cfg.ShutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-grace must be positive, got %s", cfg.ShutdownGrace))
	}
	if cfg.MaxMessageSize <= 0 {
		errs = append(errs, fmt.Errorf("--max-message-size must be positive, got %d", cfg.MaxMessageSize))
	}
	if cfg.AgentListen == "" {
		errs = append(errs, errors.New("--agent-listen must not be empty"))
	}
	if *secretFile != "" {
		secret, err := cli.ReadSecretFile(*secretFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--private-api-secret-file: %w", err))
		} else if len(secret) < tunserver.MinPrivateSecretLen {
			errs = append(errs, fmt.Errorf("--private-api-secret-file: the secret is %d bytes, it must be at least %d", len(secret), tunserver.MinPrivateSecretLen))
		}
		cfg.PrivateAPISecret = []byte(secret)
	}
	if cfg.PrivateURL != "" {
		if _, _, err := tunserver.ParsePrivateURL(cfg.PrivateURL); err != nil {
			errs = append(errs, fmt.Errorf("--private-url: %w", err))
		}
	}
	if *redisAddr != "" {
		cfg.Redis = &tracker.RedisConfig{
			Address:       *redisAddr,
			KeyPrefix:     *redisPrefix,
			PasswordFile:  *redisPasswordFile,
			TTL:           *trackerTTL,
			RefreshPeriod: *trackerRefresh,
		}
		if err := cfg.Redis.Validate(); err != nil {
			errs = append(errs, err)
		}
		cfg.TrackerRefresh = *trackerRefresh
		if *secretFile == "" {
			errs = append(errs, errors.New("--redis-address needs --private-api-secret-file: kas replicas authenticate each other with it"))
		}
		if cfg.PrivateListen == "" {
			errs = append(errs, errors.New("--redis-address needs --private-listen: other replicas reach this kas there"))
		}
	}
	log, err := cli.NewLogger(logOut, *logLevel)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Config{}, cli.UsageError{Err: errors.Join(errs...)}
	}
	auth, err := tunserver.NewStaticTokens(m)
	if err != nil {
		return Config{}, cli.UsageError{Err: err}
	}
	cfg.Authenticator = auth
	cfg.Log = log
	return cfg, nil
}

// agentTokens merges --agent-token flags and the tokens file into token -> agent id.
func agentTokens(flags *cli.KeyValues, file string) (map[string]int64, error) {
	m := map[string]int64{}
	add := func(where, id, token string) error {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: agent id %q is not a decimal int64", where, id)
		}
		if other, dup := m[token]; dup && other != n {
			return fmt.Errorf("%s: the same token is given to agents %d and %d", where, other, n)
		}
		m[token] = n
		return nil
	}
	for _, p := range flags.Pairs {
		if err := add("--agent-token", p[0], p[1]); err != nil {
			return nil, err
		}
	}
	if file == "" {
		return m, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("--agent-tokens-file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		id, token, ok := strings.Cut(text, "=")
		id, token = strings.TrimSpace(id), strings.TrimSpace(token)
		if !ok || id == "" || token == "" {
			return nil, fmt.Errorf("%s:%d: want ID=TOKEN", file, line)
		}
		if err := add(fmt.Sprintf("%s:%d", file, line), id, token); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--agent-tokens-file: %w", err)
	}
	return m, nil
}
