package agentk

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

const usage = `
agentk dials out to kas and serves gRPC calls that kas routes to it through tunnels. Out of the box it
serves gRPC health, server reflection and a demo service (tunnelbench.demo.v1.Demo).

Over TLS, verifying kas with a CA file and reading the token from a file:
  agentk --kas-address kas.example:8150 --kas-ca-file ca.pem --token-file agent-token.txt

Usage: agentk --token TOKEN [flags]
`

// ParseArgs builds a Config from agentk's command line and the files it names. Problems come back as
// cli.UsageError; --help prints the usage to stdout and returns cli.ErrHelp.
func ParseArgs(args []string, stdout, logOut io.Writer) (Config, error) {
	fs := flag.NewFlagSet("agentk", flag.ContinueOnError)
	cli.SetUsage(fs, usage)
	var cfg Config
	fs.StringVar(&cfg.KasAddress, "kas-address", DefaultKasAddress, "kas agent API address")
	token := fs.String("token", "", "agent token (prefer --token-file: command lines are visible to other users)")
	tokenFile := fs.String("token-file", "", "file holding the agent token")
	kasTLS := fs.Bool("kas-tls", false, "connect to kas over TLS, verifying it with the system roots (implied by --kas-ca-file)")
	kasCA := fs.String("kas-ca-file", "", "PEM CA `FILE` that verifies kas's certificate; turns TLS on")
	kasServerName := fs.String("kas-server-name", "", "name expected in kas's certificate (default: the host of --kas-address)")
	certFile := fs.String("tls-cert-file", "", "PEM client certificate `FILE` for kas's mutual TLS (--agent-ca-file on kas); reloaded when it changes")
	keyFile := fs.String("tls-key-file", "", "PEM private key `FILE` of --tls-cert-file")
	fs.IntVar(&cfg.Pool.MinIdle, "min-idle", tunclient.DefaultMinIdle, fmt.Sprintf("idle tunnels kept open (%d by default with --single-use-tunnels: each call ends its tunnel)", tunclient.DefaultMinIdleSingleUse))
	fs.IntVar(&cfg.Pool.MaxConnections, "max-connections", tunclient.DefaultMaxConnections, "most tunnels open at once")
	fs.IntVar(&cfg.Pool.ScaleUpStep, "scale-up-step", tunclient.DefaultScaleUpStep, "tunnels opened at once when idle ones run short")
	fs.DurationVar(&cfg.Pool.MaxIdleTime, "max-idle-time", tunclient.DefaultMaxIdleTime, "idle time after which tunnels above --min-idle close")
	fs.BoolVar(&cfg.Pool.NoBatches, "no-tunnel-batches", false, "never offer kas batches, so that each message of a call travels alone, as agents before batches did (to compare)")
	fs.BoolVar(&cfg.Pool.SingleUse, "single-use-tunnels", false, "open a tunnel per call, as the protocol's first version does, instead of tunnels that carry call after call (to compare; a kas that does not offer reuse gets single-use tunnels anyway)")
	fs.StringVar(&cfg.KasClient, "kas-client", KasClientHTTP2, "client of the connection to kas: http2 (gRPC's protocol on an HTTP/2 client that spends no goroutine on an idle tunnel) or grpc (gRPC-go's ClientConn, as agents before it; to compare)")
	fs.IntVar(&cfg.Pool.MaxMessageSize, "max-message-size", tunclient.DefaultMaxMessageSize, "largest proxied message in bytes")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", "", "address serving /metrics, /healthz and /readyz, for example 127.0.0.1:8152; empty disables it")
	fs.BoolVar(&cfg.NoDemo, "no-demo", false, "do not serve the built-in demo service (an --expose of tunnelbench.demo.v1.Demo replaces it anyway)")
	httpUpstream := fs.String("http-upstream", "", "base `URL` of a local HTTP server: kas's /agents/{id}/{path} reaches it as {URL}/{path}")
	expose := &cli.KeyValues{Form: "SERVICE=ADDR"}
	fs.Var(expose, "expose", "serve gRPC `SERVICE=ADDR` through the tunnel: every call of SERVICE (full name, e.g. my.pkg.Greeter) goes to the plaintext gRPC server at ADDR (repeatable)")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", "export a span per proxied call over OTLP/gRPC to this `HOST:PORT` (plaintext); empty: no tracing")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return Config{}, err
	}
	var errs []error
	switch {
	case *token != "" && *tokenFile != "":
		errs = append(errs, errors.New("give --token or --token-file, not both"))
	case *tokenFile != "":
		t, err := cli.ReadSecretFile(*tokenFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--token-file: %w", err))
		}
		cfg.Token = t
	case *token != "":
		cfg.Token = *token
	default:
		errs = append(errs, errors.New("no agent token: give --token or --token-file"))
	}
	if cfg.KasAddress == "" {
		errs = append(errs, errors.New("--kas-address must not be empty"))
	}
	if cfg.KasClient != KasClientHTTP2 && cfg.KasClient != KasClientGRPC {
		errs = append(errs, fmt.Errorf("--kas-client must be %s or %s, got %q", KasClientHTTP2, KasClientGRPC, cfg.KasClient))
	}
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive, got %d", name, v))
		}
	}
	if cfg.Pool.SingleUse && !cli.IsSet(fs, "min-idle") {
		cfg.Pool.MinIdle = tunclient.DefaultMinIdleSingleUse
	}
	positive("min-idle", cfg.Pool.MinIdle)
	positive("max-connections", cfg.Pool.MaxConnections)
	positive("scale-up-step", cfg.Pool.ScaleUpStep)
	positive("max-message-size", cfg.Pool.MaxMessageSize)
	if cfg.Pool.MinIdle > cfg.Pool.MaxConnections {
		errs = append(errs, fmt.Errorf("--min-idle (%d) must not exceed --max-connections (%d)", cfg.Pool.MinIdle, cfg.Pool.MaxConnections))
	}
	if cfg.Pool.MaxIdleTime <= 0 {
		errs = append(errs, fmt.Errorf("--max-idle-time must be positive, got %s", cfg.Pool.MaxIdleTime))
	}
	for _, p := range expose.Pairs {
		if cfg.Expose == nil {
			cfg.Expose = map[string]string{}
		}
		if _, dup := cfg.Expose[p[0]]; dup {
			errs = append(errs, fmt.Errorf("--expose: service %s given twice", p[0]))
		}
		if strings.Contains(p[0], "/") {
			errs = append(errs, fmt.Errorf("--expose: %q is not a full service name such as my.pkg.Greeter", p[0]))
		}
		if _, _, err := net.SplitHostPort(p[1]); err != nil {
			errs = append(errs, fmt.Errorf("--expose %s: address %q is not host:port", p[0], p[1]))
		}
		cfg.Expose[p[0]] = p[1]
	}
	if *httpUpstream != "" {
		u, err := url.Parse(*httpUpstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			shown := ": not a URL" // the parse error would quote the value, password included
			if err == nil {
				shown = fmt.Sprintf(" %q", u.Redacted())
			}
			errs = append(errs, fmt.Errorf("--http-upstream%s: want an http:// or https:// URL with a host", shown))
		} else {
			cfg.HTTPUpstream = u
		}
	}
	tlsConfig, err := kasTLSConfig(*kasTLS, *kasCA, *kasServerName, *certFile, *keyFile)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.TLS = tlsConfig
	log, err := cli.NewLogger(logOut, *logLevel)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Config{}, cli.UsageError{Err: errors.Join(errs...)}
	}
	cfg.Log = log
	return cfg, nil
}

// kasTLSConfig builds the TLS configuration of the connection to kas from the flags; nil is plaintext.
func kasTLSConfig(on bool, caFile, serverName, certFile, keyFile string) (*tls.Config, error) {
	on = on || caFile != ""
	if !on {
		if serverName != "" || certFile != "" || keyFile != "" {
			return nil, errors.New("--kas-server-name, --tls-cert-file and --tls-key-file need TLS: give --kas-ca-file or --kas-tls")
		}
		return nil, nil
	}
	var roots *x509.CertPool
	if caFile != "" {
		var err error
		if roots, err = tlsfiles.CertPool(caFile); err != nil {
			return nil, fmt.Errorf("--kas-ca-file: %w", err)
		}
	}
	var cert *tlsfiles.Reloader
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, errors.New("a client certificate needs both --tls-cert-file and --tls-key-file")
		}
		var err error
		if cert, err = tlsfiles.NewReloader(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("--tls-cert-file and --tls-key-file: %w", err)
		}
	}
	return tlsfiles.Client(roots, serverName, cert), nil
}
