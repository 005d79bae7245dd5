package kas_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

func TestParseArgs(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# comment\n\n2 = two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shortSecret := filepath.Join(dir, "short")
	if err := os.WriteFile(shortSecret, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := kas.ParseArgs([]string{"--agent-token", "1=one", "--agent-tokens-file", tokens, "--tunnel-find-timeout", "3s"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FindTimeout.String() != "3s" || cfg.Authenticator == nil || cfg.AgentListen != kas.DefaultAgentListen {
		t.Fatalf("config %+v", cfg)
	}
	bad := map[string][]string{
		"no tokens":         {},
		"bad token form":    {"--agent-token", "1"},
		"bad agent id":      {"--agent-token", "x=tok"},
		"token twice":       {"--agent-token", "1=zq-secret", "--agent-token", "2=zq-secret"},
		"missing file":      {"--agent-token", "1=a", "--agent-tokens-file", filepath.Join(dir, "none")},
		"bad duration":      {"--agent-token", "1=a", "--tunnel-find-timeout", "2x"},
		"negative age":      {"--agent-token", "1=a", "--max-connection-age", "-1s"},
		"redis w/o secret":  {"--agent-token", "1=a", "--redis-address", "127.0.0.1:6379"},
		"short secret":      {"--agent-token", "1=a", "--private-api-secret-file", shortSecret},
		"bad private url":   {"--agent-token", "1=a", "--private-url", "http://x:1"},
		"refresh above ttl": {"--agent-token", "1=a", "--redis-address", "r:1", "--private-api-secret-file", tokens, "--tracker-refresh-period", "10m"},
		"bad log level":     {"--agent-token", "1=a", "--log-level", "chatty"},
		"stray argument":    {"--agent-token", "1=a", "extra"},
		"unknown flag":      {"--nope"},
	}
	for name, args := range bad {
		_, err := kas.ParseArgs(args, &bytes.Buffer{}, &bytes.Buffer{})
		var ue cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a usage error", name, err)
			continue
		}
		var stderr bytes.Buffer
		if code := cli.ExitCode("kas", err, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, message %q", name, code, stderr.String())
		}
		if strings.Contains(stderr.String(), "zq-secret") {
			t.Errorf("a token leaked into the message: %q", stderr.String())
		}
	}
	var out bytes.Buffer
	if _, err := kas.ParseArgs([]string{"--help"}, &out, &bytes.Buffer{}); !errors.Is(err, cli.ErrHelp) || !strings.Contains(out.String(), "--agent-listen") && !strings.Contains(out.String(), "-agent-listen") {
		t.Fatalf("help: %v\n%s", err, out.String())
	}
}
