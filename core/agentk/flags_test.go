package agentk_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/agentk"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/cli"
	"github.com/tunnelbench/tunnelbench/internal/testcerts"
)

// secret is the token in these tests; it must never show up in a message.
const secret = "zq-secret"

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// usageMessage is what agentk prints for err, which must be a usage error: exit code 2, one line.
func usageMessage(t *testing.T, args []string, err error) string {
	t.Helper()
	var ue cli.UsageError
	if !errors.As(err, &ue) {
		t.Fatalf("%q: %v, want a usage error", args, err)
	}
	var stderr bytes.Buffer
	if code := cli.ExitCode("agentk", err, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("%q: exit %d, message %q, want exit 2 and one line", args, code, stderr.String())
	}
	return stderr.String()
}

func TestParseArgs(t *testing.T) {
	dir := t.TempDir()
	certs := testcerts.New(t)
	tokenFile := writeFile(t, dir, "token", "\n  "+secret+"  \n")
	emptyFile := writeFile(t, dir, "empty", " \n")
	notPEM := writeFile(t, dir, "not.pem", "not a certificate\n")
	parse := func(t *testing.T, args ...string) agentk.Config {
		t.Helper()
		cfg, err := agentk.ParseArgs(args, &bytes.Buffer{}, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if cfg.Log == nil {
			t.Fatalf("%q: no logger", args)
		}
		return cfg
	}

	t.Run("defaults", func(t *testing.T) {
		cfg := parse(t, "--token", secret)
		want := tunclient.Config{MinIdle: tunclient.DefaultMinIdle, MaxConnections: tunclient.DefaultMaxConnections,
			ScaleUpStep: tunclient.DefaultScaleUpStep, MaxIdleTime: tunclient.DefaultMaxIdleTime, MaxMessageSize: tunclient.DefaultMaxMessageSize}
		if cfg.Token != secret || cfg.KasAddress != agentk.DefaultKasAddress || cfg.KasClient != agentk.KasClientHTTP2 || cfg.TLS != nil || cfg.HTTPUpstream != nil || cfg.Expose != nil || cfg.NoDemo {
			t.Fatalf("config %+v", cfg)
		}
		if cfg.Pool.MinIdle != want.MinIdle || cfg.Pool.MaxConnections != want.MaxConnections || cfg.Pool.ScaleUpStep != want.ScaleUpStep ||
			cfg.Pool.MaxIdleTime != want.MaxIdleTime || cfg.Pool.MaxMessageSize != want.MaxMessageSize {
			t.Fatalf("pool %+v, want the defaults %+v", cfg.Pool, want)
		}
	})
	t.Run("kas client", func(t *testing.T) {
		if cfg := parse(t, "--token", secret, "--kas-client", "grpc"); cfg.KasClient != agentk.KasClientGRPC {
			t.Fatalf("kas client %q, want grpc", cfg.KasClient)
		}
	})
	t.Run("token file", func(t *testing.T) {
		if cfg := parse(t, "--token-file", tokenFile); cfg.Token != secret {
			t.Fatalf("token %q, want the file's content without surrounding space", cfg.Token)
		}
	})
	t.Run("pool", func(t *testing.T) {
		cfg := parse(t, "--token", secret, "--min-idle", "1", "--max-connections", "3", "--scale-up-step", "2", "--max-idle-time", "5s", "--max-message-size", "1024")
		if p := cfg.Pool; p.MinIdle != 1 || p.MaxConnections != 3 || p.ScaleUpStep != 2 || p.MaxIdleTime != 5*time.Second || p.MaxMessageSize != 1024 {
			t.Fatalf("pool %+v", p)
		}
	})
	t.Run("expose and http upstream", func(t *testing.T) {
		cfg := parse(t, "--token", secret, "--expose", "my.pkg.Greeter=127.0.0.1:9000", "--expose", "other.Svc=[::1]:9001",
			"--http-upstream", "http://127.0.0.1:8080/base?k=v", "--no-demo")
		if len(cfg.Expose) != 2 || cfg.Expose["my.pkg.Greeter"] != "127.0.0.1:9000" || cfg.Expose["other.Svc"] != "[::1]:9001" {
			t.Fatalf("expose %v", cfg.Expose)
		}
		if cfg.HTTPUpstream == nil || cfg.HTTPUpstream.String() != "http://127.0.0.1:8080/base?k=v" || !cfg.NoDemo {
			t.Fatalf("http upstream %v, no demo %v", cfg.HTTPUpstream, cfg.NoDemo)
		}
	})
	t.Run("tls with system roots", func(t *testing.T) {
		cfg := parse(t, "--token", secret, "--kas-tls", "--kas-server-name", "kas.example")
		if cfg.TLS == nil || cfg.TLS.RootCAs != nil || cfg.TLS.ServerName != "kas.example" || cfg.TLS.GetClientCertificate != nil {
			t.Fatalf("TLS %+v", cfg.TLS)
		}
	})
	t.Run("tls with a CA and a client certificate", func(t *testing.T) {
		cfg := parse(t, "--token", secret, "--kas-ca-file", certs.CAFile, "--tls-cert-file", certs.ClientCert, "--tls-key-file", certs.ClientKey)
		if cfg.TLS == nil || cfg.TLS.RootCAs == nil || cfg.TLS.ServerName != "" || cfg.TLS.GetClientCertificate == nil {
			t.Fatalf("TLS %+v", cfg.TLS)
		}
	})

	bad := map[string]struct {
		args []string
		want []string // fragments of the message
	}{
		"no token":                  {nil, []string{"no agent token: give --token or --token-file"}},
		"empty token":               {[]string{"--token", ""}, []string{"no agent token"}},
		"token and token file":      {[]string{"--token", secret, "--token-file", tokenFile}, []string{"give --token or --token-file, not both"}},
		"missing token file":        {[]string{"--token-file", filepath.Join(dir, "none")}, []string{"--token-file " + filepath.Join(dir, "none") + ": no such file or directory"}},
		"empty token file":          {[]string{"--token-file", emptyFile}, []string{"--token-file", "is empty"}},
		"token flag without value":  {[]string{"--token"}, []string{"flag --token needs a value"}},
		"empty kas address":         {[]string{"--token", secret, "--kas-address", ""}, []string{"--kas-address must not be empty"}},
		"unknown kas client":        {[]string{"--token", secret, "--kas-client", "quic"}, []string{`--kas-client must be http2 or grpc, got "quic"`}},
		"zero min idle":             {[]string{"--token", secret, "--min-idle", "0"}, []string{"--min-idle must be positive, got 0"}},
		"negative connections":      {[]string{"--token", secret, "--max-connections", "-1"}, []string{"--max-connections must be positive, got -1"}},
		"zero scale-up step":        {[]string{"--token", secret, "--scale-up-step", "0"}, []string{"--scale-up-step must be positive, got 0"}},
		"zero message size":         {[]string{"--token", secret, "--max-message-size", "0"}, []string{"--max-message-size must be positive, got 0"}},
		"min idle above max":        {[]string{"--token", secret, "--min-idle", "5", "--max-connections", "3"}, []string{"--min-idle (5) must not exceed --max-connections (3)"}},
		"zero idle time":            {[]string{"--token", secret, "--max-idle-time", "0s"}, []string{"--max-idle-time must be positive, got 0s"}},
		"bad idle time":             {[]string{"--token", secret, "--max-idle-time", "2x"}, []string{`invalid value "2x" for flag --max-idle-time`}},
		"not a number":              {[]string{"--token", secret, "--min-idle", "two"}, []string{`invalid value "two" for flag --min-idle`}},
		"every problem at once":     {[]string{"--min-idle", "0", "--max-idle-time", "-1s"}, []string{"no agent token", "--min-idle must be positive", "--max-idle-time must be positive"}},
		"expose without addr":       {[]string{"--token", secret, "--expose", "my.pkg.Greeter"}, []string{"want SERVICE=ADDR", "-expose"}},
		"expose twice":              {[]string{"--token", secret, "--expose", "a.B=127.0.0.1:1", "--expose", "a.B=127.0.0.1:2"}, []string{"--expose: service a.B given twice"}},
		"expose a method":           {[]string{"--token", secret, "--expose", "a.B/Call=127.0.0.1:1"}, []string{`"a.B/Call" is not a full service name`}},
		"expose bad address":        {[]string{"--token", secret, "--expose", "a.B=nohost"}, []string{`--expose a.B: address "nohost" is not host:port`}},
		"http upstream scheme":      {[]string{"--token", secret, "--http-upstream", "ftp://127.0.0.1/"}, []string{`--http-upstream "ftp://127.0.0.1/"`, "want an http:// or https:// URL with a host"}},
		"http upstream no host":     {[]string{"--token", secret, "--http-upstream", "http:///path"}, []string{"--http-upstream", "with a host"}},
		"http upstream unparsable":  {[]string{"--token", secret, "--http-upstream", "http://[::1"}, []string{"--http-upstream"}},
		"server name without TLS":   {[]string{"--token", secret, "--kas-server-name", "kas.example"}, []string{"need TLS: give --kas-ca-file or --kas-tls"}},
		"client cert without TLS":   {[]string{"--token", secret, "--tls-cert-file", certs.ClientCert, "--tls-key-file", certs.ClientKey}, []string{"need TLS"}},
		"cert without key":          {[]string{"--token", secret, "--kas-tls", "--tls-cert-file", certs.ClientCert}, []string{"needs both --tls-cert-file and --tls-key-file"}},
		"key without cert":          {[]string{"--token", secret, "--kas-tls", "--tls-key-file", certs.ClientKey}, []string{"needs both --tls-cert-file and --tls-key-file"}},
		"missing CA file":           {[]string{"--token", secret, "--kas-ca-file", filepath.Join(dir, "none.pem")}, []string{"--kas-ca-file " + filepath.Join(dir, "none.pem") + ": no such file or directory"}},
		"CA file not PEM":           {[]string{"--token", secret, "--kas-ca-file", notPEM}, []string{"--kas-ca-file", "holds no PEM certificate"}},
		"token file as CA file":     {[]string{"--token", secret, "--kas-ca-file", tokenFile}, []string{"--kas-ca-file", "holds no PEM certificate"}},
		"missing cert file":         {[]string{"--token", secret, "--kas-tls", "--tls-cert-file", filepath.Join(dir, "none.pem"), "--tls-key-file", certs.ClientKey}, []string{"--tls-cert-file " + filepath.Join(dir, "none.pem") + ": no such file or directory"}},
		"key does not match":        {[]string{"--token", secret, "--kas-tls", "--tls-cert-file", certs.ClientCert, "--tls-key-file", certs.ServerKey}, []string{"--tls-cert-file and --tls-key-file: TLS certificate", "and key"}},
		"bad log level":             {[]string{"--token", secret, "--log-level", "chatty"}, []string{`--log-level "chatty"`}},
		"stray argument":            {[]string{"--token", secret, "extra"}, []string{`unexpected argument "extra"`}},
		"flag typo":                 {[]string{"--token", secret, "--kas-adress", "kas:8150"}, []string{"unknown flag --kas-adress; did you mean --kas-address?"}},
		"metrics address":           {[]string{"--token", secret, "--metrics-listen", "8152"}, []string{`--metrics-listen "8152": want HOST:PORT`}},
		"missing key file":          {[]string{"--token", secret, "--kas-tls", "--tls-cert-file", certs.ClientCert, "--tls-key-file", filepath.Join(dir, "none-key.pem")}, []string{"--tls-key-file " + filepath.Join(dir, "none-key.pem") + ": no such file or directory"}},
		"unknown flag":              {[]string{"--token", secret, "--nope"}, []string{"unknown flag --nope (run 'agentk --help' for usage)"}},
		"token swallowed by a flag": {[]string{"--min-idle", "--token=" + secret}, []string{`invalid value "--token=<redacted>" for flag --min-idle`}},
		"password in the upstream":  {[]string{"--token", secret, "--http-upstream", "http://user:" + secret + "@/x"}, []string{"--http-upstream", "with a host"}},
		"password, unparsable URL":  {[]string{"--token", secret, "--http-upstream", "http://user:" + secret + "@[::1"}, []string{"--http-upstream: not a URL"}},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			cfg, err := agentk.ParseArgs(c.args, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil {
				t.Fatalf("%q: accepted: %+v", c.args, cfg)
			}
			msg := usageMessage(t, c.args, err)
			if strings.Contains(msg, secret) {
				t.Errorf("%q: the token leaked into the message %q", c.args, msg)
			}
			for _, want := range c.want {
				if !strings.Contains(msg, want) {
					t.Errorf("%q: message %q does not say %q", c.args, msg, want)
				}
			}
		})
	}

	t.Run("help", func(t *testing.T) {
		var out bytes.Buffer
		_, err := agentk.ParseArgs([]string{"--help"}, &out, &bytes.Buffer{})
		if !errors.Is(err, cli.ErrHelp) || cli.ExitCode("agentk", err, &bytes.Buffer{}) != 0 {
			t.Fatalf("help: %v", err)
		}
		for _, want := range []string{"Usage: agentk", "-token-file", "-kas-ca-file", "-http-upstream", "-expose"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("help does not mention %q:\n%s", want, out.String())
			}
		}
	})
}

// FuzzParseArgs: any command line (arguments joined by NUL) gets a config or a one-line usage error
// (exit code 2), never a panic; and a token given with --token never shows in the message.
func FuzzParseArgs(f *testing.F) {
	for _, seed := range []string{
		"--token\x00" + secret,
		"--token\x00" + secret + "\x00--kas-address\x00kas.example:8150\x00--kas-tls\x00--kas-server-name\x00kas.example",
		"--token=" + secret + "\x00--expose\x00my.pkg.Greeter=127.0.0.1:9000\x00--expose\x00a/b=x",
		"--token\x00" + secret + "\x00--http-upstream\x00https://user:pw@up.example/base?k=v",
		"--min-idle\x00-1\x00--max-connections\x000\x00--scale-up-step\x009999999999999999999\x00--max-idle-time\x00-1ns",
		"--token\x00\x00--kas-address\x00\x00--log-level\x00DEBUG",
		"--help",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		for _, a := range args {
			if strings.Contains(a, "-file") {
				return // reading arbitrary paths is not what this fuzzes
			}
		}
		checkParse(t, args)
		// With a token first, which is parsed as the token whatever follows, the token must not leak.
		if !strings.Contains(line, "canary") {
			checkParse(t, append([]string{"--token", "zq-canary-token"}, args...))
		}
	})
}

// checkParse parses args: a config with a logger, help, or a one-line usage error without the token.
func checkParse(t *testing.T, args []string) {
	cfg, err := agentk.ParseArgs(args, &bytes.Buffer{}, &bytes.Buffer{})
	switch {
	case err == nil:
		if cfg.Log == nil || cfg.Token == "" || cfg.KasAddress == "" {
			t.Fatalf("%q: incomplete config %+v", args, cfg)
		}
	case errors.Is(err, cli.ErrHelp):
	default:
		msg := usageMessage(t, args, err)
		if strings.Contains(msg, "zq-canary-token") {
			t.Fatalf("%q: the token leaked into the message %q", args, msg)
		}
	}
}
