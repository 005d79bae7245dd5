package refusal

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/peer"
)

func TestRefusedOncePerIntervalPerReason(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Minute)
	now := time.Unix(0, 0)
	l.now = func() time.Time { return now }
	for range 10 {
		l.Refused("agent", "invalid agent token", "peer", "10.0.0.1:4000")
		now = now.Add(time.Second)
	}
	l.Refused("caller", "invalid caller token", "peer", "10.0.0.2:4000")
	now = now.Add(time.Minute)
	l.Refused("agent", "invalid agent token", "peer", "10.0.0.1:4001")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=WARN msg="refused agent" reason="invalid agent token" peer=10.0.0.1:4000 suppressed=0 quiet_for=1m0s`,
		`level=WARN msg="refused caller" reason="invalid caller token" peer=10.0.0.2:4000 suppressed=0 quiet_for=1m0s`,
		`level=WARN msg="refused agent" reason="invalid agent token" peer=10.0.0.1:4001 suppressed=9 quiet_for=1m0s`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d:\n%s\nwant it to end with\n%s", i, lines[i], w)
		}
	}
}

func TestNilLogAndPeer(t *testing.T) {
	var l *Log
	l.Refused("agent", "x") // no panic
	if a := Peer(context.Background()); a.Value.String() != "in-process" {
		t.Fatal(a)
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}})
	if a := Peer(ctx); a.Value.String() != "127.0.0.1:9" {
		t.Fatal(a)
	}
}
