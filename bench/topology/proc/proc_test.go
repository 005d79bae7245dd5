package proc

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

func TestProcOutputAndExit(t *testing.T) {
	p, err := Start("echo", "sh", "-c", "echo out; echo err >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("sh did not exit")
	}
	if got := p.Stdout(); got != "out\n" {
		t.Errorf("stdout %q", got)
	}
	if got := p.Output(); !strings.Contains(got, "out\n") || !strings.Contains(got, "err\n") {
		t.Errorf("output %q", got)
	}
	if err := p.Exited(); err == nil || !strings.Contains(err.Error(), "echo exited (exit status 3): ") {
		t.Errorf("exited: %v", err)
	}
	if err := p.Stop(time.Second); err == nil {
		t.Error("stop of an ended process forgot its exit error")
	}
}

func TestWaitReady(t *testing.T) {
	p, err := Start("sleeper", "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	n := 0
	if err := p.WaitReady(context.Background(), 5*time.Second, func() bool { n++; return n == 3 }); err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(context.Background(), 50*time.Millisecond, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "sleeper not ready after 50ms") {
		t.Fatalf("timeout: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(context.Background(), 5*time.Second, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "sleeper exited") {
		t.Fatalf("after kill: %v", err)
	}
}

func TestStopSendsSIGTERMThenKills(t *testing.T) {
	p, err := Start("polite", "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(5 * time.Second); err == nil || !strings.Contains(err.Error(), "signal: terminated") {
		t.Fatalf("stop: %v", err)
	}
	stubborn, err := Start("stubborn", "sh", "-c", "trap '' TERM; echo ready; sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	if err := stubborn.WaitReady(context.Background(), 5*time.Second, func() bool { return stubborn.Stdout() != "" }); err != nil {
		t.Fatal(err)
	}
	if err := stubborn.Stop(100 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not stop within 100ms") {
		t.Fatalf("stop: %v", err)
	}
}

func TestOutputKeepsTheStart(t *testing.T) {
	var b lockedBuffer
	chunk := strings.Repeat("x", MaxOutput/2+1)
	for range 3 {
		if n, err := b.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if got := len(b.String()); got != MaxOutput {
		t.Fatalf("kept %d bytes, want %d", got, MaxOutput)
	}
}

func TestLastLines(t *testing.T) {
	if got := LastLines("a\nb\nc\nd\n", 2); got != "c; d" {
		t.Fatalf("%q", got)
	}
}

func TestBinariesBuildOnce(t *testing.T) {
	testtier.Full(t, "runs go build")
	root := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("cmd/hello/main.go", "package main\n\nfunc main() { println(\"hello\") }\n")
	b := &Binaries{Root: root}
	path, err := b.Path("hello")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(filepath.Dir(path))
	p, err := Start("hello", path)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("hello did not exit")
	}
	if !strings.Contains(p.Output(), "hello") {
		t.Fatalf("hello said %q", p.Output())
	}
	write("cmd/hello/main.go", "package main\n\nfunc main() { syntax error }\n")
	if again, err := b.Path("hello"); err != nil || again != path {
		t.Fatalf("second Path built again: %q, %v", again, err)
	}
	if _, err := (&Binaries{Root: root}).Path("hello"); err == nil || !strings.Contains(err.Error(), "go build ./cmd/...") {
		t.Fatalf("broken build: %v", err)
	}
}

func TestRedisOutageAndBack(t *testing.T) {
	testtier.Full(t, "needs redis-server")
	r, err := StartRedis("")
	if err != nil {
		t.Fatal(err)
	}
	dir := r.dir
	addr := r.Addr()
	if err := ping(addr); err != nil {
		t.Fatalf("after start: %v", err)
	}
	if err := r.Start(); err == nil {
		t.Error("a second Start of a running Redis succeeded")
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := ping(addr); err == nil {
		t.Error("PONG after Kill")
	}
	if err := r.Kill(); err == nil {
		t.Error("Kill of a stopped Redis succeeded")
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(); err != nil || r.Addr() != addr || ping(addr) != nil {
		t.Fatalf("restart: %v, %s, %v", err, r.Addr(), ping(addr))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", dir, err)
	}
}

func TestRedisInGivenDirStays(t *testing.T) {
	testtier.Full(t, "needs redis-server")
	dir := t.TempDir()
	a, err := StartRedis(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := StartRedis(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers share %s", a.Addr())
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("Close removed the caller's directory: %v", err)
	}
	if err := ping(b.Addr()); err != nil {
		t.Errorf("closing one server stopped the other: %v", err)
	}
}

func TestFreeAddr(t *testing.T) {
	a, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("listen on %s: %v", a, err)
	}
	_ = l.Close()
}
