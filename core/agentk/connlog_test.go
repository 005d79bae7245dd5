package agentk_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/agentk"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunclient/reconnect"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// linesWith returns the lines that contain s.
func (l *logBuffer) linesWith(s string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// quickRetries makes many failed attempts fit in a short test; each is logged at debug level.
var quickRetries = reconnect.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, Factor: 2, Jitter: 0.2}

// startLoggedAgentk runs agentk with token against addr, logging into a buffer.
func startLoggedAgentk(t *testing.T, addr, token string, tlsConfig ...*tls.Config) (*agentk.Agentk, *logBuffer) {
	t.Helper()
	var logs logBuffer
	cfg := agentk.Config{KasAddress: addr, Token: token, Log: logs.logger(), Pool: tunclient.Config{Backoff: quickRetries}}
	if len(tlsConfig) > 0 {
		cfg.TLS = tlsConfig[0]
	}
	k, err := agentk.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopAgentk(k) })
	return k, &logs
}

func stopAgentk(k *agentk.Agentk) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k.Stop(ctx)
}

// waitFailures waits until agentk's tunnels failed at least n times (each failure is a debug line).
func waitFailures(t *testing.T, logs *logBuffer, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() bool { return len(logs.linesWith(`msg="tunnel failed"`)) >= n },
		"fewer than %d failed attempts", n)
}

// wantOneWarning checks that many failures made exactly one warning (the window is 30 s, far longer
// than the test), with the reason and the next retry.
func wantOneWarning(t *testing.T, logs *logBuffer, reason string) {
	t.Helper()
	warnings := logs.linesWith("cannot connect to kas")
	if len(warnings) != 1 {
		t.Fatalf("%d warnings for %d failures within one window, want 1:\n%s", len(warnings), len(logs.linesWith(`msg="tunnel failed"`)), logs)
	}
	w := warnings[0]
	if !strings.Contains(w, "level=WARN") || !strings.Contains(w, reason) || !strings.Contains(w, "retry_in=") {
		t.Fatalf("warning %q, want the reason %q and the next retry", w, reason)
	}
}

func TestWrongTokenLoggedOncePerWindowNeverTheToken(t *testing.T) {
	var kasLogs logBuffer
	e := testenv.Start(t, testenv.Options{Agents: -1, Kas: func(c *kas.Config) { c.Log = kasLogs.logger() }})
	const token = "wrong-secret-token-0123456789"
	k, logs := startLoggedAgentk(t, e.Kas.Addrs().Agent.String(), token)
	waitFailures(t, logs, 10)
	stopAgentk(k)

	wantOneWarning(t, logs, `reason="kas refused the agent token (check --token or --token-file)"`)
	refused := kasLogs.linesWith(`msg="refused agent"`)
	if len(refused) != 1 || !strings.Contains(refused[0], `reason="invalid agent token"`) || !strings.Contains(refused[0], "peer=127.0.0.1:") {
		t.Fatalf("kas logged %q, want one refusal with its reason and the agent's address", refused)
	}
	for name, l := range map[string]*logBuffer{"agentk": logs, "kas": &kasLogs} {
		if strings.Contains(l.String(), token) {
			t.Fatalf("the %s log holds the token:\n%s", name, l)
		}
	}
}

func TestTLSFailureLogged(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Agents: -1}) // plaintext kas
	k, logs := startLoggedAgentk(t, e.Kas.Addrs().Agent.String(), testenv.Token(1), &tls.Config{RootCAs: x509.NewCertPool()})
	waitFailures(t, logs, 5)
	stopAgentk(k)
	wantOneWarning(t, logs, `reason="TLS handshake with kas failed"`)
}

func TestKasDownLoggedOnceThenBack(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // kas is down: nothing listens there
	_, logs := startLoggedAgentk(t, addr, testenv.Token(1))
	waitFailures(t, logs, 10)
	wantOneWarning(t, logs, `reason="kas is down or not listening (connection refused)"`)

	// kas comes back on its address.
	authn, err := auth.NewStaticTokens(map[string]int64{testenv.Token(1): 1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kas.New(kas.Config{AgentListen: addr, Authenticator: authn})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("kas cannot come back on its address: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	testenv.Eventually(t, 10*time.Second, func() bool { return len(logs.linesWith("connected to kas again")) == 1 },
		"agentk never said it was back:\n%s", logs)
	if back := logs.linesWith("connected to kas again")[0]; !strings.Contains(back, "level=INFO") || !strings.Contains(back, "failures=") {
		t.Fatalf("back: %q", back)
	}
	if n := srv.Registry().Stats().IdleTunnels; n < 1 {
		t.Fatalf("agentk said it was back with %d idle tunnels on kas", n)
	}
}
