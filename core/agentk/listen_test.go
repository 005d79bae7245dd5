package agentk_test

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/agentk"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// TestMainBusyMetricsPort: agentk started on a metrics port that is taken says which flag to change,
// exits 1 (the command line is fine, the machine is not), and leaves nothing running.
func TestMainBusyMetricsPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	err = agentk.Main(t.Context(), []string{"--token", secret, "--kas-address", "127.0.0.1:1", "--metrics-listen", addr}, &bytes.Buffer{}, &bytes.Buffer{})
	var stderr bytes.Buffer
	if code := cli.ExitCode("agentk", err, &stderr); code != 1 {
		t.Fatalf("exit %d (%v), want 1", code, err)
	}
	if want := "agentk: --metrics-listen " + addr + ": address already in use\n"; stderr.String() != want {
		t.Fatalf("got %q, want %q", stderr.String(), want)
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	_, err := agentk.ParseArgs([]string{"--version"}, &out, &bytes.Buffer{})
	if code := cli.ExitCode("agentk", err, &bytes.Buffer{}); code != 0 || !strings.HasPrefix(out.String(), "agentk github.com/tunnelbench/tunnelbench ") {
		t.Fatalf("exit %d, %q", code, out.String())
	}
}

// TestMainConfigError: what New refuses is the configuration: exit 2, one line naming the flag.
func TestMainConfigError(t *testing.T) {
	err := agentk.Main(t.Context(), []string{"--token", secret, "--kas-address", "127.0.0.1:1", "--expose", "grpc.health.v1.Health=127.0.0.1:1"}, &bytes.Buffer{}, &bytes.Buffer{})
	var stderr bytes.Buffer
	if code := cli.ExitCode("agentk", err, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 ||
		!strings.Contains(stderr.String(), "--expose grpc.health.v1.Health=127.0.0.1:1: ") || !strings.Contains(stderr.String(), "already registered") {
		t.Fatalf("exit %d, %q", code, stderr.String())
	}
}
