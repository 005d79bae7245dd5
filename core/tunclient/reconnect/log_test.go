package reconnect

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// syncBuffer is a log destination that several goroutines may write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines are the JSON log lines written so far.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestConnectLogOncePerWindowWithReasonAndRetry(t *testing.T) {
	var buf syncBuffer
	l := NewLog(slog.New(slog.NewJSONHandler(&buf, nil)), 30*time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	refused := status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:8150: connect: connection refused\"")

	for range 5 { // an outage: many tunnels, many retries within the window
		l.Failed(refused, 1500*time.Millisecond)
		now = now.Add(5 * time.Second)
	}
	lines := buf.lines(t)
	if len(lines) != 1 {
		t.Fatalf("%d lines in one window, want 1: %v", len(lines), lines)
	}
	first := lines[0]
	if first["level"] != "WARN" || first["msg"] != "cannot connect to kas, retrying" || first["retry_in"] != "1.5s" ||
		first["reason"] != "kas is down or not listening (connection refused)" || first["code"] != "Unavailable" || first["failures"] != 1.0 {
		t.Fatalf("first line %v", first)
	}
	now = now.Add(5 * time.Second) // 30 s after the first line
	l.Failed(refused, 5*time.Second)
	lines = buf.lines(t)
	if len(lines) != 2 || lines[1]["failures"] != 5.0 || lines[1]["retry_in"] != "5s" {
		t.Fatalf("the window's next line: %v, want the 5 failures since the last line", lines)
	}
	// A new reason is news: logged at once.
	l.Failed(status.Error(codes.Unauthenticated, "invalid agent token"), time.Second)
	lines = buf.lines(t)
	if len(lines) != 3 || !strings.Contains(lines[2]["reason"].(string), "refused the agent token") {
		t.Fatalf("new reason: %v", lines)
	}
	l.Connected()
	l.Connected() // once
	lines = buf.lines(t)
	if len(lines) != 4 || lines[3]["level"] != "INFO" || lines[3]["msg"] != "connected to kas again" || lines[3]["failures"] != 7.0 || lines[3]["after"] != "30s" {
		t.Fatalf("back: %v", lines)
	}
	// The next outage is logged at once.
	l.Failed(refused, time.Second)
	if lines = buf.lines(t); len(lines) != 5 {
		t.Fatalf("next outage: %v", lines)
	}
}

func TestFailureReasons(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{status.Error(codes.Unauthenticated, "invalid agent token"), "kas refused the agent token"},
		{status.Error(codes.Unavailable, "connection error: desc = \"transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority\""), "TLS handshake with kas failed"},
		{status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp: lookup kas.invalid: no such host\""), "kas address does not resolve"},
		{status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 10.0.0.1:8150: i/o timeout\""), "kas unreachable"},
		{status.Error(codes.Unavailable, "error reading from server: EOF"), "connection to kas lost"},
		{status.Error(codes.ResourceExhausted, "agent 1 already has 1000 tunnels"), "a limit of kas"},
		{status.Error(codes.Internal, "oops"), "tunnel to kas failed"},
	} {
		if got := failureReason(tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("%v: reason %q, want %q", tc.err, got, tc.want)
		}
	}
}
