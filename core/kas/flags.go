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
	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/core/tracker"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

const usage = `
kas accepts tunnels from agents (agentk) and routes gRPC calls to them.

Callers pick the agent with the metadata "kas-hop-routing-agent-id: <id>" and prove who they are with
"authorization: Bearer <caller token>", for example:
  grpcurl -cacert ca.pem -H 'authorization: Bearer CALLER_TOKEN' -H 'kas-hop-routing-agent-id: 1' kas.example:8153 list

Secure start (every listener on TLS, agents and callers with tokens read from files):
  kas --tls-cert-file kas.pem --tls-key-file kas-key.pem \
      --agent-tokens-file agents.txt --caller-tokens-file callers.txt

Development on loopback (plaintext, any caller):
  kas --dev --agent-token 1=dev-token

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
	callers := &cli.KeyValues{Form: "IDS=TOKEN"}
	fs.Var(callers, "caller-token", "a caller `IDS=TOKEN`: the bearer TOKEN may reach agents IDS (comma-separated ids, or * for every agent) through the public API and the HTTP listener (repeatable; prefer --caller-tokens-file)")
	callersFile := fs.String("caller-tokens-file", "", "`FILE` with one IDS=TOKEN per line ('#' starts a comment)")
	hops := fs.Bool("gateway-hop-streams", true, "carry eager calls to another kas one after another on kept streams instead of a stream each (false: a stream per call, as kas before v0.4 did; both ways)")
	eager := fs.Bool("eager-gateway", true, "send a call for an agent held by another kas straight to the kas where it was found last time, without a find or a round trip (false: always search, as kas before v0.3 did)")
	fs.BoolVar(&cfg.NoTunnelBatches, "no-tunnel-batches", false, "refuse batches on every tunnel, so that each message of a call travels alone, as kas before batches did (to compare)")
	fs.BoolVar(&cfg.SingleUseTunnels, "single-use-tunnels", false, "give every tunnel one call, as the protocol's first version does, even to agents that ask for reusable tunnels (to compare)")
	fs.BoolVar(&cfg.Dev, "dev", false, "development mode: the public API and the HTTP listener accept any caller without a token; refused unless both listen on loopback")
	tlsCert := fs.String("tls-cert-file", "", "PEM certificate `FILE` served on every listener (reloaded when it changes); with --tls-key-file, turns TLS on")
	tlsKey := fs.String("tls-key-file", "", "PEM private key `FILE` of --tls-cert-file")
	agentCA := fs.String("agent-ca-file", "", "PEM CA `FILE`: agents must present a client certificate signed by it (mutual TLS)")
	peerCA := fs.String("peer-ca-file", "", "PEM CA `FILE` that verifies other replicas on grpcs:// private URLs (default: the system roots)")
	tlsMetrics := fs.Bool("tls-metrics", false, "serve the metrics listener over TLS too")
	fs.IntVar(&cfg.Limits.MaxTunnelsPerAgent, "max-tunnels-per-agent", limits.Default.MaxTunnelsPerAgent, "most tunnels one agent may hold on this kas; more are refused with ResourceExhausted")
	fs.IntVar(&cfg.Limits.MaxWaitingPerAgent, "max-waiting-calls-per-agent", limits.Default.MaxWaitingPerAgent, "most calls that may wait for a tunnel to one agent; more fail at once with ResourceExhausted")
	fs.IntVar(&cfg.Limits.MaxWaiting, "max-waiting-calls", limits.Default.MaxWaiting, "most calls that may wait for a tunnel on this kas, for any agent; more fail at once with ResourceExhausted")
	fs.IntVar(&cfg.Limits.MaxWaitingPerCaller, "max-waiting-calls-per-caller", limits.Default.MaxWaitingPerCaller, "most calls of one caller token that may wait for a tunnel; more fail at once with ResourceExhausted")
	fs.IntVar(&cfg.Limits.MaxMetadataBytes, "max-metadata-bytes", limits.Default.MaxMetadataBytes, "largest request metadata of a routed call in bytes (name + value + 32 per entry, as HTTP/2 counts); larger calls fail at once with ResourceExhausted")
	fs.DurationVar(&cfg.Limits.TunnelHandshakeTimeout, "tunnel-handshake-timeout", limits.Default.TunnelHandshakeTimeout, "how long a new tunnel may take to send its descriptor before kas ends it")
	fs.IntVar(&cfg.Limits.MaxConnections, "max-connections", limits.Default.MaxConnections, "most open connections of the HTTP and metrics listeners each; more wait to be accepted until one closes (gRPC listeners bound connections in time instead: 10 s to finish the handshake, --idle-connection-timeout without a stream)")
	fs.DurationVar(&cfg.Limits.IdleConnectionTimeout, "idle-connection-timeout", limits.Default.IdleConnectionTimeout, "how long a connection may stay without a call or tunnel (public, private and agent API, HTTP) before kas closes it")
	fs.Float64Var(&cfg.Limits.TunnelRate, "max-tunnel-rate", limits.Default.TunnelRate, "new tunnels per second one agent may open on average (a single-use agent opens one per call)")
	fs.IntVar(&cfg.Limits.TunnelBurst, "max-tunnel-burst", limits.Default.TunnelBurst, "new tunnels one agent may open at once above --max-tunnel-rate")
	fs.IntVar(&cfg.Limits.MaxDescriptorBytes, "max-descriptor-bytes", limits.Default.MaxDescriptorBytes, "largest descriptor (the first message of a tunnel, listing what the agent serves) in bytes")
	fs.Int64Var(&cfg.Limits.MaxHTTPBody, "max-http-body", limits.Default.MaxHTTPBody, "largest HTTP request body in bytes through the HTTP listener (413 above it)")
	fs.IntVar(&cfg.Limits.MaxHTTPHeaderBytes, "max-http-header-bytes", limits.Default.MaxHTTPHeaderBytes, "largest HTTP request line and header in bytes on the HTTP listener (431 above it)")
	fs.DurationVar(&cfg.Limits.HTTPReadHeaderTimeout, "http-read-header-timeout", limits.Default.HTTPReadHeaderTimeout, "how long an HTTP client may take to send a request header (slow clients are cut off)")
	fs.DurationVar(&cfg.FindTimeout, "tunnel-find-timeout", routing.DefaultFindTimeout, "how long a call may wait for a tunnel to its agent")
	fs.DurationVar(&cfg.UnservedGrace, "unserved-grace", presence.DefaultUnservedGrace, "how long a call waits when its agent is connected but none of its tunnels serve the method (an agent being upgraded may bring one), before it fails with Unimplemented (HTTP 502); 0 waits --tunnel-find-timeout")
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
	cfg.NoEagerGateway = !*eager
	cfg.NoHopStreams = !*hops
	var errs []error
	positiveLimit := func(name string, v float64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive, got %g", name, v))
		}
	}
	positiveLimit("max-tunnels-per-agent", float64(cfg.Limits.MaxTunnelsPerAgent))
	positiveLimit("max-waiting-calls-per-agent", float64(cfg.Limits.MaxWaitingPerAgent))
	positiveLimit("max-tunnel-rate", cfg.Limits.TunnelRate)
	positiveLimit("max-tunnel-burst", float64(cfg.Limits.TunnelBurst))
	positiveLimit("max-http-body", float64(cfg.Limits.MaxHTTPBody))
	positiveLimit("max-descriptor-bytes", float64(cfg.Limits.MaxDescriptorBytes))
	positiveLimit("max-http-header-bytes", float64(cfg.Limits.MaxHTTPHeaderBytes))
	positiveLimit("http-read-header-timeout", cfg.Limits.HTTPReadHeaderTimeout.Seconds())
	positiveLimit("max-waiting-calls", float64(cfg.Limits.MaxWaiting))
	positiveLimit("max-waiting-calls-per-caller", float64(cfg.Limits.MaxWaitingPerCaller))
	positiveLimit("max-metadata-bytes", float64(cfg.Limits.MaxMetadataBytes))
	positiveLimit("tunnel-handshake-timeout", cfg.Limits.TunnelHandshakeTimeout.Seconds())
	positiveLimit("max-connections", float64(cfg.Limits.MaxConnections))
	positiveLimit("idle-connection-timeout", cfg.Limits.IdleConnectionTimeout.Seconds())
	if cfg.Limits.MaxMetadataBytes > cfg.MaxMessageSize && cfg.MaxMessageSize > 0 {
		errs = append(errs, fmt.Errorf("--max-metadata-bytes (%d) must not be larger than --max-message-size (%d): a call's metadata travels to the agent in one tunnel message", cfg.Limits.MaxMetadataBytes, cfg.MaxMessageSize))
	}
	switch {
	case *tlsCert != "" && *tlsKey != "":
		cfg.TLS = &TLSConfig{CertFile: *tlsCert, KeyFile: *tlsKey, AgentCAFile: *agentCA, PeerCAFile: *peerCA, Metrics: *tlsMetrics}
		errs = append(errs, checkTLSFiles(cfg.TLS)...)
	case *tlsCert != "" || *tlsKey != "":
		errs = append(errs, errors.New("TLS needs both --tls-cert-file and --tls-key-file"))
	case *agentCA != "" || *peerCA != "" || *tlsMetrics:
		errs = append(errs, errors.New("--agent-ca-file, --peer-ca-file and --tls-metrics need --tls-cert-file and --tls-key-file"))
	}
	callerMap, err := callerTokens(callers, *callersFile)
	switch {
	case err != nil:
		errs = append(errs, err)
	case len(callerMap) > 0 && cfg.Dev:
		errs = append(errs, errors.New("give caller tokens or --dev, not both"))
	case len(callerMap) > 0:
		if cfg.Callers, err = auth.NewStaticCallerTokens(callerMap); err != nil {
			errs = append(errs, err)
		}
	case !cfg.Dev && (cfg.APIListen != "" || cfg.HTTPListen != ""):
		errs = append(errs, errors.New("no caller tokens: give --caller-token IDS=TOKEN or --caller-tokens-file, or --dev on loopback"))
	}
	if cfg.Dev {
		for name, a := range map[string]string{"--api-listen": cfg.APIListen, "--http-listen": cfg.HTTPListen} {
			if a != "" && !isLoopback(a) {
				errs = append(errs, fmt.Errorf("--dev is for loopback only, but %s is %s", name, a))
			}
		}
	}
	m, err := agentTokens(tokens, *tokensFile)
	if err != nil {
		errs = append(errs, err)
	} else if len(m) == 0 {
		errs = append(errs, errors.New("no agent tokens: give --agent-token ID=TOKEN or --agent-tokens-file"))
	}
	if cfg.FindTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--tunnel-find-timeout must be positive, got %s", cfg.FindTimeout))
	}
	if cfg.UnservedGrace < 0 {
		errs = append(errs, fmt.Errorf("--unserved-grace must not be negative, got %s", cfg.UnservedGrace))
	} else if cfg.UnservedGrace == 0 {
		cfg.UnservedGrace = -1 // Config: negative waits the find timeout
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
		} else if len(secret) < auth.MinPrivateSecretLen {
			errs = append(errs, fmt.Errorf("--private-api-secret-file: the secret is %d bytes, it must be at least %d", len(secret), auth.MinPrivateSecretLen))
		}
		cfg.PrivateAPISecret = []byte(secret)
	}
	if cfg.PrivateURL != "" {
		if _, _, err := routing.ParsePrivateURL(cfg.PrivateURL); err != nil {
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
		if *redisPasswordFile != "" {
			if _, err := cli.ReadSecretFile(*redisPasswordFile); err != nil {
				errs = append(errs, fmt.Errorf("--redis-password-file: %w", err))
			}
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
	auth, err := auth.NewStaticTokens(m)
	if err != nil {
		return Config{}, cli.UsageError{Err: err}
	}
	cfg.Authenticator = auth
	cfg.Log = log
	// The checks above say each problem in terms of flags; whatever New would still refuse is a
	// problem of the command line too, and must exit 2 as they do.
	if err := cfg.validate(); err != nil {
		return Config{}, cli.UsageError{Err: err}
	}
	return cfg, nil
}

// checkTLSFiles loads the TLS files as New will: a file that is not what its flag says (not PEM, a key
// that does not match) is a mistake on the command line, said with its flag before kas starts.
func checkTLSFiles(t *TLSConfig) []error {
	var errs []error
	if _, err := tlsfiles.NewReloader(t.CertFile, t.KeyFile); err != nil {
		errs = append(errs, fmt.Errorf("--tls-cert-file and --tls-key-file: %w", err))
	}
	for _, ca := range []struct{ flag, file string }{{"agent-ca-file", t.AgentCAFile}, {"peer-ca-file", t.PeerCAFile}} {
		if ca.file == "" {
			continue
		}
		if _, err := tlsfiles.CertPool(ca.file); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", ca.flag, err))
		}
	}
	return errs
}

// agentTokens merges --agent-token flags and the tokens file into token -> agent id.
func agentTokens(flags *cli.KeyValues, file string) (map[string]int64, error) {
	pairs, err := tokenPairs("--agent-token", flags, "--agent-tokens-file", file, "ID=TOKEN")
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, p := range pairs {
		n, err := strconv.ParseInt(p.key, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: agent id %q is not a decimal int64", p.where, p.key)
		}
		if other, dup := m[p.token]; dup && other != n {
			return nil, fmt.Errorf("%s: the same token is given to agents %d and %d", p.where, other, n)
		}
		m[p.token] = n
	}
	return m, nil
}

// callerTokens merges --caller-token flags and the tokens file into token -> agent ids (nil: every
// agent). A token given twice reaches the union of its agents.
func callerTokens(flags *cli.KeyValues, file string) (map[string][]int64, error) {
	pairs, err := tokenPairs("--caller-token", flags, "--caller-tokens-file", file, "IDS=TOKEN")
	if err != nil {
		return nil, err
	}
	m := map[string][]int64{}
	all := map[string]bool{}
	for _, p := range pairs {
		if p.key == "*" {
			all[p.token] = true
			continue
		}
		for _, f := range strings.Split(p.key, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: agent id %q is not a decimal int64 (want IDS=TOKEN, IDS comma-separated or *)", p.where, f)
			}
			m[p.token] = append(m[p.token], n)
		}
	}
	for tok := range all {
		m[tok] = nil
	}
	return m, nil
}

type tokenPair struct{ where, key, token string }

// tokenPairs reads KEY=TOKEN pairs from repeatable flags and from a file with one per line, where
// blank lines and lines starting with '#' are skipped. Errors name the flag or file:line, never a token.
func tokenPairs(flagName string, flags *cli.KeyValues, fileFlag, file, form string) ([]tokenPair, error) {
	var pairs []tokenPair
	for _, p := range flags.Pairs {
		pairs = append(pairs, tokenPair{flagName, p[0], p[1]})
	}
	if file == "" {
		return pairs, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileFlag, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, token, ok := strings.Cut(text, "=")
		key, token = strings.TrimSpace(key), strings.TrimSpace(token)
		if !ok || key == "" || token == "" {
			return nil, fmt.Errorf("%s:%d: want %s", file, line, form)
		}
		pairs = append(pairs, tokenPair{fmt.Sprintf("%s:%d", file, line), key, token})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", fileFlag, err)
	}
	return pairs, nil
}
