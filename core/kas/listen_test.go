package kas_test

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// TestMainBusyPort starts kas with each listener on a port that is taken: the error names that
// listener's flag and the reason in one line, the exit code is 1 (the command line is fine, the
// machine is not), and what kas built before it failed stops with it (goleak checks).
func TestMainBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	flags := []string{"agent-listen", "api-listen", "private-listen", "metrics-listen", "http-listen"}
	for _, taken := range flags {
		t.Run(taken, func(t *testing.T) {
			args := []string{"--dev", "--agent-token", "1=zq-secret"}
			for _, f := range flags {
				a := "127.0.0.1:0"
				if f == taken {
					a = addr
				}
				args = append(args, "--"+f, a)
			}
			err := kas.Main(t.Context(), args, &bytes.Buffer{}, &bytes.Buffer{})
			var stderr bytes.Buffer
			if code := cli.ExitCode("kas", err, &stderr); code != 1 {
				t.Fatalf("exit %d (%v), want 1", code, err)
			}
			if want := "kas: --" + taken + " " + addr + ": address already in use\n"; stderr.String() != want {
				t.Fatalf("got %q, want %q", stderr.String(), want)
			}
		})
	}
}

func TestVersionAndHelp(t *testing.T) {
	var out bytes.Buffer
	_, err := kas.ParseArgs([]string{"--version"}, &out, &bytes.Buffer{})
	if code := cli.ExitCode("kas", err, &bytes.Buffer{}); code != 0 || !strings.HasPrefix(out.String(), "kas github.com/tunnelbench/tunnelbench ") || !strings.Contains(out.String(), " go1.") {
		t.Fatalf("exit %d, %q", code, out.String())
	}
	out.Reset()
	_, err = kas.ParseArgs([]string{"--help"}, &out, &bytes.Buffer{})
	if code := cli.ExitCode("kas", err, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "-version") || !strings.Contains(out.String(), "-agent-listen") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}
