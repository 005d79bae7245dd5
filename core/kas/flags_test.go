package kas_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/kas/limits"
	"github.com/tunnelbench/tunnelbench/internal/cli"
	"github.com/tunnelbench/tunnelbench/internal/testcerts"
)

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseArgs(t *testing.T) {
	dir := t.TempDir()
	tokens := writeFile(t, dir, "tokens", "# comment\n\n2 = two\n")
	callers := writeFile(t, dir, "callers", "# ops may reach everyone\n*=ops-token\n1,2 = team-token\n")
	shortSecret := writeFile(t, dir, "short", "short\n")
	secret := writeFile(t, dir, "secret", strings.Repeat("s", 40)+"\n")
	emptyPassword := writeFile(t, dir, "redis-password", "\n")
	cfg, err := kas.ParseArgs([]string{"--agent-token", "1=one", "--agent-tokens-file", tokens, "--tunnel-find-timeout", "3s", "--dev"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FindTimeout.String() != "3s" || cfg.Authenticator == nil || cfg.AgentListen != kas.DefaultAgentListen || !cfg.Dev || cfg.Callers != nil || cfg.TLS != nil {
		t.Fatalf("config %+v", cfg)
	}
	if cfg.Limits != limits.Default {
		t.Fatalf("limits %+v, want the defaults %+v", cfg.Limits, limits.Default)
	}

	certs := testcerts.New(t)
	cfg, err = kas.ParseArgs([]string{"--agent-token", "1=one", "--caller-tokens-file", callers, "--caller-token", "3=team-token",
		"--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey, "--agent-ca-file", certs.CAFile, "--max-waiting-calls-per-agent", "7"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || cfg.TLS.CertFile != certs.ServerCert || cfg.TLS.AgentCAFile != certs.CAFile || cfg.Limits.MaxWaitingPerAgent != 7 {
		t.Fatalf("config %+v, TLS %+v", cfg, cfg.TLS)
	}
	for _, c := range []struct {
		token string
		agent int64
		ok    bool
	}{{"ops-token", 99, true}, {"team-token", 1, true}, {"team-token", 3, true}, {"team-token", 4, false}} {
		caller, err := cfg.Callers.AuthenticateCaller(t.Context(), c.token)
		if err != nil {
			t.Fatalf("%s: %v", c.token, err)
		}
		if caller.MayReach(c.agent) != c.ok {
			t.Errorf("%s may reach agent %d: %v, want %v", c.token, c.agent, !c.ok, c.ok)
		}
	}
	if _, err := cfg.Callers.AuthenticateCaller(t.Context(), "nobody"); err == nil {
		t.Error("an unknown caller token was accepted")
	}

	bad := map[string]struct {
		args []string
		want string
	}{
		"no tokens":            {[]string{"--dev"}, "no agent tokens"},
		"bad token form":       {[]string{"--dev", "--agent-token", "1"}, "want ID=TOKEN"},
		"bad agent id":         {[]string{"--dev", "--agent-token", "x=tok"}, `agent id "x"`},
		"token twice":          {[]string{"--dev", "--agent-token", "1=zq-secret", "--agent-token", "2=zq-secret"}, "the same token is given to agents"},
		"missing file":         {[]string{"--dev", "--agent-token", "1=a", "--agent-tokens-file", filepath.Join(dir, "none")}, "--agent-tokens-file " + filepath.Join(dir, "none") + ": no such file or directory"},
		"missing cert":         {[]string{"--agent-token", "1=a", "--caller-token", "*=zq-secret", "--tls-cert-file", filepath.Join(dir, "none"), "--tls-key-file", certs.ServerKey}, "--tls-cert-file " + filepath.Join(dir, "none") + ": no such file or directory"},
		"missing CA":           {[]string{"--agent-token", "1=a", "--caller-token", "*=zq-secret", "--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey, "--peer-ca-file", filepath.Join(dir, "none")}, "--peer-ca-file " + filepath.Join(dir, "none") + ": no such file or directory"},
		"missing secret file":  {[]string{"--dev", "--agent-token", "1=a", "--private-api-secret-file", dir}, "--private-api-secret-file " + dir + ": is a directory"},
		"key does not match":   {[]string{"--agent-token", "1=a", "--caller-token", "*=zq-secret", "--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ClientKey}, "--tls-cert-file and --tls-key-file: TLS certificate"},
		"CA not PEM":           {[]string{"--agent-token", "1=a", "--caller-token", "*=zq-secret", "--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey, "--agent-ca-file", tokens}, "--agent-ca-file: CA file " + tokens + " holds no PEM certificate"},
		"empty redis password": {[]string{"--dev", "--agent-token", "1=a", "--redis-address", "127.0.0.1:6379", "--private-api-secret-file", secret, "--redis-password-file", emptyPassword}, "--redis-password-file: " + emptyPassword + " is empty"},
		"flag typo":            {[]string{"--dev", "--agent-token", "1=a", "--agent-lisen", "127.0.0.1:8150"}, "unknown flag --agent-lisen; did you mean --agent-listen?"},
		"listen without port":  {[]string{"--dev", "--agent-token", "1=a", "--http-listen", "127.0.0.1"}, `--http-listen "127.0.0.1": want HOST:PORT`},
		"bad duration":         {[]string{"--dev", "--agent-token", "1=a", "--tunnel-find-timeout", "2x"}, "tunnel-find-timeout"},
		"negative age":         {[]string{"--dev", "--agent-token", "1=a", "--max-connection-age", "-1s"}, "--max-connection-age must not be negative"},
		"redis w/o secret":     {[]string{"--dev", "--agent-token", "1=a", "--redis-address", "127.0.0.1:6379"}, "--redis-address needs --private-api-secret-file"},
		"short secret":         {[]string{"--dev", "--agent-token", "1=a", "--private-api-secret-file", shortSecret}, "at least 32"},
		"bad private url":      {[]string{"--dev", "--agent-token", "1=a", "--private-url", "http://x:1"}, "--private-url"},
		"refresh above ttl":    {[]string{"--dev", "--agent-token", "1=a", "--redis-address", "r:1", "--private-api-secret-file", tokens, "--tracker-refresh-period", "10m"}, "refresh"},
		"bad log level":        {[]string{"--dev", "--agent-token", "1=a", "--log-level", "chatty"}, "chatty"},
		"stray argument":       {[]string{"--dev", "--agent-token", "1=a", "extra"}, "extra"},
		"unknown flag":         {[]string{"--nope"}, "unknown flag --nope (run 'kas --help' for usage)"},
		"no caller tokens":     {[]string{"--agent-token", "1=a"}, "no caller tokens"},
		"dev beyond loopback":  {[]string{"--dev", "--agent-token", "1=a", "--api-listen", "0.0.0.0:8153"}, "--dev is for loopback only, but --api-listen is 0.0.0.0:8153"},
		"dev and callers":      {[]string{"--dev", "--agent-token", "1=a", "--caller-token", "*=zq-secret"}, "not both"},
		"bad caller ids":       {[]string{"--agent-token", "1=a", "--caller-token", "1,x=zq-secret"}, `agent id "x"`},
		"cert without key":     {[]string{"--dev", "--agent-token", "1=a", "--tls-cert-file", certs.ServerCert}, "both --tls-cert-file and --tls-key-file"},
		"mTLS without TLS":     {[]string{"--dev", "--agent-token", "1=a", "--agent-ca-file", certs.CAFile}, "need --tls-cert-file"},
		"zero limit":           {[]string{"--dev", "--agent-token", "1=a", "--max-tunnels-per-agent", "0"}, "--max-tunnels-per-agent must be positive"},
		"negative body limit":  {[]string{"--dev", "--agent-token", "1=a", "--max-http-body", "-5"}, "--max-http-body must be positive"},
	}
	for name, c := range bad {
		_, err := kas.ParseArgs(c.args, &bytes.Buffer{}, &bytes.Buffer{})
		var ue cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a usage error", name, err)
			continue
		}
		var stderr bytes.Buffer
		if code := cli.ExitCode("kas", err, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, message %q", name, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: message %q does not say %q", name, stderr.String(), c.want)
		}
		if strings.Contains(stderr.String(), "zq-secret") {
			t.Errorf("a token leaked into the message: %q", stderr.String())
		}
	}
	var out bytes.Buffer
	if _, err := kas.ParseArgs([]string{"--help"}, &out, &bytes.Buffer{}); !errors.Is(err, cli.ErrHelp) || !strings.Contains(out.String(), "-caller-tokens-file") || !strings.Contains(out.String(), "Secure start") {
		t.Fatalf("help: %v\n%s", err, out.String())
	}
}

// FuzzParseArgs: any command line gets a config or a one-line usage error (exit code 2), never a panic.
func FuzzParseArgs(f *testing.F) {
	for _, seed := range []string{
		"--dev\x00--agent-token\x001=zq-secret",
		"--agent-token\x001=zq-secret\x00--caller-token\x00*=zq-secret",
		"--agent-token\x001=zq-secret\x00--caller-token\x001,2,x=zq-secret",
		"--tls-cert-file\x00c\x00--tls-key-file\x00k\x00--agent-ca-file\x00a\x00--dev",
		"--dev\x00--agent-token\x001=zq-secret\x00--api-listen\x00[::1]:1\x00--http-listen\x00localhost:2",
		"--max-tunnel-rate\x00NaN\x00--max-tunnel-burst\x00-1\x00--max-http-body\x009999999999999999999",
		"--redis-address\x00r:1\x00--tracker-ttl\x001ns",
		"--caller-token\x00=\x00--agent-token\x00=zq-secret",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		if slicesContainsFileFlag(args) {
			return // reading arbitrary paths is not what this fuzzes
		}
		_, err := kas.ParseArgs(args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || errors.Is(err, cli.ErrHelp) {
			return
		}
		var ue cli.UsageError
		if !errors.As(err, &ue) {
			t.Fatalf("%q: %v, want a usage error", args, err)
		}
		var stderr bytes.Buffer
		if code := cli.ExitCode("kas", err, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 {
			t.Fatalf("%q: exit %d, message %q", args, code, stderr.String())
		}
	})
}

func slicesContainsFileFlag(args []string) bool {
	for _, a := range args {
		if strings.Contains(a, "-file") {
			return true
		}
	}
	return false
}
