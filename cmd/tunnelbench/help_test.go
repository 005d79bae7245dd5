package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// runArgs runs the command line as main does and returns its exit code, stdout and stderr.
func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	code := cli.ExitCode("tunnelbench", err, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestHelp: `help` lists the commands, `help X` is X's own --help (its flags) for every command the
// list names, and `scenario --help` shows scenario run's flags.
func TestHelp(t *testing.T) {
	code, out, _ := runArgs(t, "help")
	cmds := commands()
	if code != 0 || len(cmds) < 5 {
		t.Fatalf("help: exit %d, commands %q\n%s", code, cmds, out)
	}
	for _, c := range []string{"bench", "scenario", "chaos", "demo-server", "help", "version"} {
		if !slices.Contains(cmds, c) {
			t.Errorf("help does not list %s:\n%s", c, out)
		}
	}
	for _, c := range cmds {
		if c == "help" || c == "version" {
			continue
		}
		t.Run(c, func(t *testing.T) {
			code, help, stderr := runArgs(t, "help", c)
			if code != 0 || stderr != "" {
				t.Fatalf("help %s: exit %d, stderr %q", c, code, stderr)
			}
			if !strings.Contains(help, "Usage: tunnelbench "+c) || !strings.Contains(help, "Flags:") || !strings.Contains(help, "-version") {
				t.Errorf("help %s is not its usage with flags:\n%s", c, help)
			}
			if _, own, _ := runArgs(t, c, "--help"); own != help {
				t.Errorf("help %s differs from %s --help:\n%s\n---\n%s", c, c, help, own)
			}
		})
	}
	for _, args := range [][]string{{"scenario", "--help"}, {"scenario", "-h"}, {"scenario", "help"}, {"scenario", "run", "--help"}} {
		code, help, _ := runArgs(t, args...)
		if code != 0 || !strings.Contains(help, "-out") || !strings.Contains(help, "-metrics-listen") || !strings.Contains(help, "Usage: tunnelbench scenario run FILE") {
			t.Errorf("%q: exit %d, no flags:\n%s", args, code, help)
		}
	}
}

// TestPathsHelp: --paths's help names every path bench knows, with what it measures.
func TestPathsHelp(t *testing.T) {
	_, help, _ := runArgs(t, "help", "bench")
	known := slices.Concat(bench.DefaultMatrix().Paths, bench.QuickMatrix().Paths)
	// ParsePath's error lists every path it takes: those must be known here too.
	_, err := bench.ParsePath("?")
	_, want, _ := strings.Cut(err.Error(), "(want ")
	for _, f := range strings.FieldsFunc(strings.TrimSuffix(want, ")"), func(r rune) bool { return r == ',' || r == ' ' }) {
		if f != "or" {
			known = append(known, bench.Path(f))
		}
	}
	if len(known) < 5 {
		t.Fatalf("paths %q", known)
	}
	for _, p := range known {
		if _, err := bench.ParsePath(string(p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		if bench.PathMeanings[p] == "" || !strings.Contains(help, "  "+string(p)+" ") || !strings.Contains(help, bench.PathMeanings[p]) {
			t.Errorf("--paths help does not explain %s:\n%s", p, help)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"bench", "--version"}, {"demo-server", "--version"}, {"kas", "--version"}} {
		code, out, _ := runArgs(t, args...)
		if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "github.com/tunnelbench/tunnelbench") || !strings.Contains(out, " go1.") {
			t.Errorf("%q: exit %d, %q", args, code, out)
		}
	}
}

// TestBadArgs: a mistake on the command line is one line that says what to fix, and exit 2.
func TestBadArgs(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bnech"}, `unknown command "bnech"; did you mean bench? (run 'tunnelbench --help' for usage)`},
		{[]string{"--vesion"}, `unknown command "--vesion"; did you mean version?`},
		{[]string{"help", "nonsense"}, `unknown command "nonsense"`},
		{[]string{"help", "bench", "chaos"}, "help takes one command"},
		{[]string{"bench", "--quik"}, "unknown flag --quik; did you mean --quick? (run 'tunnelbench bench --help' for usage)"},
		{[]string{"bench", "--duration"}, "flag --duration needs a value"},
		{[]string{"bench", "--metrics-listen", "9090"}, `--metrics-listen "9090": want HOST:PORT`},
		{[]string{"scenario", "run", missing}, "scenario file " + missing + ": no such file or directory (run 'tunnelbench scenario run --help' for usage)"},
		{[]string{"scenario", "run", "--ot", "x", missing}, "unknown flag --ot; did you mean --out?"},
		{[]string{"scenario", "--out=x"}, "want: tunnelbench scenario run FILE"},
		{[]string{"scenario"}, "want: tunnelbench scenario run FILE"},
		{[]string{"chaos", "--onyl", "x"}, "did you mean --only?"},
		{[]string{"demo-server", "--listen", "localhost"}, `--listen "localhost": want HOST:PORT`},
		{[]string{"demo-server", "--lisen", ":0"}, "did you mean --listen?"},
	} {
		code, _, stderr := runArgs(t, c.args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and one line saying %q", c.args, code, stderr, c.want)
		}
	}
}

// TestBusyPort: a listener on a port that is taken names its flag; it is not a usage error (exit 1).
func TestBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"demo-server", "--listen", addr}, "--listen"},
		{[]string{"bench", "--metrics-listen", addr, "--quick", "--out", t.TempDir()}, "--metrics-listen"},
		{[]string{"chaos", "--metrics-listen", addr, "--dir", filepath.Join("..", "..", "scenarios"), "--out", t.TempDir()}, "--metrics-listen"},
	} {
		code, _, stderr := runArgs(t, c.args...)
		if want := "tunnelbench: " + c.flag + " " + addr + ": address already in use\n"; code != 1 || stderr != want {
			t.Errorf("%q: exit %d, %q; want exit 1 and %q", c.args, code, stderr, want)
		}
	}
}
