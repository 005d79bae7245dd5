package cli

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSuggest(t *testing.T) {
	flags := []string{"agent-listen", "agent-token", "agent-tokens-file", "api-listen", "dev", "version", "help", "redis-address", "redis-key-prefix", "redis-password-file", "kas-ca-file"}
	for _, c := range []struct {
		word string
		want []string
	}{
		{"agent-lisen", []string{"agent-listen"}},
		{"agent-tokn", []string{"agent-token"}},
		{"agnet-listen", []string{"agent-listen"}},
		{"vesion", []string{"version"}},
		{"hepl", []string{"help"}},
		{"redis", []string{"redis-address", "redis-key-prefix", "redis-password-file"}},
		{"ca-file", []string{"kas-ca-file"}},
		{"tokens-file", []string{"agent-tokens-file"}},
		{"dve", nil},  // two edits in three letters is another word
		{"nope", nil}, // nothing near
		{"x", nil},    // too short to guess from
		{"", nil},
	} {
		if got := Suggest(c.word, flags); !slices.Equal(got, c.want) {
			t.Errorf("Suggest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
	for in, want := range map[string]string{
		"":        "",
		"a":       "; did you mean --a?",
		"a,b":     "; did you mean --a or --b?",
		"a,b,c":   "; did you mean --a, --b or --c?",
		"a,b,c,d": "; did you mean --a, --b or --c?",
	} {
		if got := DidYouMean("--", SplitList(in)); got != want {
			t.Errorf("DidYouMean(%q) = %q, want %q", in, got, want)
		}
	}
}

// newFlagSet is a command like the binaries': a listener, an input file, a secret and a duration.
func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("prog sub", flag.ContinueOnError)
	SetUsage(fs, "prog sub does things.")
	fs.String("agent-listen", "127.0.0.1:8150", "agent API address")
	fs.String("listen", "", "an address")
	fs.String("ca-file", "", "a CA")
	fs.String("token", "", "a secret")
	fs.Duration("timeout", time.Second, "a duration")
	fs.Bool("dev", false, "development mode")
	return fs
}

// TestParseErrors: every command line mistake is one line that names the flag to fix, says it the way
// the help spells flags (--name), exits 2 and points at the command's help.
func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent-lisen", "x"}, "unknown flag --agent-lisen; did you mean --agent-listen?"},
		{[]string{"-agent-lisen=x"}, "unknown flag --agent-lisen; did you mean --agent-listen?"},
		{[]string{"--tokne", "zq-secret"}, "unknown flag --tokne; did you mean --token?"},
		{[]string{"--vrsion"}, "unknown flag --vrsion; did you mean --version?"},
		{[]string{"--nothing-like-it"}, "unknown flag --nothing-like-it (run"},
		{[]string{"--timeout"}, "flag --timeout needs a value"},
		{[]string{"--timeout", "2x"}, `invalid value "2x" for flag --timeout`},
		{[]string{"--dev=maybe"}, `invalid boolean value "maybe" for --dev`},
		{[]string{"--ca-file", missing}, "--ca-file " + missing + ": no such file or directory"},
		{[]string{"--ca-file", dir}, "--ca-file " + dir + ": is a directory"},
		{[]string{"--agent-listen", "8150"}, `--agent-listen "8150": want HOST:PORT`},
		{[]string{"--listen", "127.0.0.1:http-alt-nonsense"}, `--listen "127.0.0.1:http-alt-nonsense": port "http-alt-nonsense" is not a port number`},
		{[]string{"--listen", "127.0.0.1:70000"}, `port "70000"`},
		{[]string{"stray"}, `unexpected argument "stray"`},
		// The flag package quotes a bad value, here a secret flag swallowed by --timeout.
		{[]string{"--timeout", "--token=zq-secret"}, `invalid value "--token=<redacted>" for flag --timeout`},
	} {
		err := Parse(newFlagSet(), c.args, &bytes.Buffer{})
		var stderr bytes.Buffer
		if code := ExitCode("prog", err, &stderr); code != 2 {
			t.Errorf("%q: exit %d (%v), want 2", c.args, code, err)
			continue
		}
		line := stderr.String()
		if strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "prog: ") || !strings.HasSuffix(line, "(run 'prog sub --help' for usage)\n") {
			t.Errorf("%q: not one line naming the command's help: %q", c.args, line)
		}
		if !strings.Contains(line, c.want) {
			t.Errorf("%q: %q does not say %q", c.args, line, c.want)
		}
		if strings.Contains(line, "zq-secret") {
			t.Errorf("%q: a secret leaked: %q", c.args, line)
		}
	}
	// Two missing files and a bad address: all of them, in one line.
	err := Parse(newFlagSet(), []string{"--ca-file", missing, "--listen", "nope"}, &bytes.Buffer{})
	var stderr bytes.Buffer
	if code := ExitCode("prog", err, &stderr); code != 2 || !strings.Contains(stderr.String(), "--ca-file") || !strings.Contains(stderr.String(), "--listen") {
		t.Errorf("exit %d, %q", code, stderr.String())
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v does not unwrap to fs.ErrNotExist", err)
	}
}

func TestParseAccepts(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		nil,
		{"--ca-file", ca, "--listen", ":0", "--agent-listen", "[::1]:8150"},
		{"--listen", "localhost:http"},    // a service name, as net.Listen takes
		{"--listen", "", "--ca-file", ""}, // empty: off
	} {
		if err := Parse(newFlagSet(), args, &bytes.Buffer{}); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	var out bytes.Buffer
	err := Parse(newFlagSet(), []string{"--help"}, &out)
	if code := ExitCode("prog", err, &bytes.Buffer{}); code != 0 || !strings.Contains(out.String(), "prog sub does things.") || !strings.Contains(out.String(), "-version") {
		t.Errorf("help: exit %d\n%s", code, out.String())
	}
	out.Reset()
	err = Parse(newFlagSet(), []string{"--version"}, &out)
	if code := ExitCode("prog", err, &bytes.Buffer{}); code != 0 || !strings.HasPrefix(out.String(), "prog ") || !strings.Contains(out.String(), "go1.") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("version: exit %d, %q", code, out.String())
	}
	// A command with a --version of its own keeps it.
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	own := fs.String("version", "", "the version to deploy")
	if err := Parse(fs, []string{"--version", "v2"}, &out); err != nil || *own != "v2" {
		t.Errorf("own --version: %v, %q", err, *own)
	}
}

func TestBuildLine(t *testing.T) {
	for _, c := range []struct {
		b    Build
		want string
	}{
		{Build{Module: "github.com/tunnelbench/tunnelbench", Version: "(devel)", Revision: "2dc419c0", Time: "2026-05-01T10:00:00Z", Modified: true, GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"github.com/tunnelbench/tunnelbench (devel) revision 2dc419c0, 2026-05-01T10:00:00Z, modified; go1.26.8 linux/amd64"},
		{Build{Module: "github.com/tunnelbench/tunnelbench", Version: "v1.2.0", Revision: "2dc419c0", GoVersion: "go1.26.8", Platform: "linux/arm64"},
			"github.com/tunnelbench/tunnelbench v1.2.0 revision 2dc419c0; go1.26.8 linux/arm64"},
		{Build{GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"github.com/tunnelbench/tunnelbench (devel) revision unknown (built without VCS stamping: go run, go test, -buildvcs=false or outside a git clone); go1.26.8 linux/amd64"},
	} {
		if got := c.b.Line(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func TestBuildFrom(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/tunnelbench/tunnelbench", Version: "v0.0.0-20261201184607-ff95aa07c7b3"},
		Settings: []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}, {Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "ff95aa07c7b3f7daa619f7a68689d1aa4a88282f"},
			{Key: "vcs.time", Value: "2026-12-01T18:46:07Z"}, {Key: "vcs.modified", Value: "false"}}}
	want := Build{Module: "github.com/tunnelbench/tunnelbench", Version: "v0.0.0-20261201184607-ff95aa07c7b3", Revision: "ff95aa07c7b3f7daa619f7a68689d1aa4a88282f",
		Time: "2026-12-01T18:46:07Z", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	if got := buildFrom(bi, "linux/amd64"); got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	// The running test binary: the Go version at least.
	if b := ReadBuild(); b.GoVersion != runtime.Version() || b.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("ReadBuild() = %+v", b)
	}
}

func TestListenError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	_, err = Listen("agent-listen", addr)
	if err == nil {
		t.Fatal("listened twice on one port")
	}
	if want := "--agent-listen " + addr + ": address already in use"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("%v does not unwrap to EADDRINUSE", err)
	}
	var stderr bytes.Buffer
	if code := ExitCode("kas", err, &stderr); code != 1 {
		t.Errorf("a busy port is not a usage error: exit %d, want 1", code)
	}
}

func TestRedactSecrets(t *testing.T) {
	for _, c := range []struct {
		args      []string
		msg, want string
	}{
		{[]string{"--min-idle", "--token=zq-secret"}, `invalid value "--token=zq-secret" for flag --min-idle`, `invalid value "--token=<redacted>" for flag --min-idle`},
		{[]string{"--agent-token", "1=zq-secret"}, `agent id "1=zq-secret"`, `agent id "1=<redacted>"`},
		{[]string{"--tls-cert-file", "--token", "zq-secret"}, `unexpected argument "zq-secret"`, `unexpected argument "<redacted>"`},
		{[]string{"--caller-token", "*=zq-secret"}, "zq-secret: x\nzq-secret", "<redacted>: x\n<redacted>"},
		// A dev token of one letter is not redacted inside words.
		{[]string{"--agent-token", "1=a"}, "--private-api-secret-file /tmp/data: is a directory", "--private-api-secret-file /tmp/data: is a directory"},
		{[]string{"--token", "zq-secret"}, "zq-secretive", "zq-secretive"},
	} {
		err := redactSecrets(errors.New(c.msg), c.args)
		if err.Error() != c.want {
			t.Errorf("%q: %q, want %q", c.args, err, c.want)
		}
	}
}
