// Package cli holds what the three binaries share: flag parsing that ends in one clear line (the
// nearest flag for a typo, the flag named in a missing file's or a busy port's error), --version,
// repeatable and file-backed flag values, logging setup, and running until SIGINT or SIGTERM. Exit codes:
// 2 for a bad command line (UsageError), 1 for a failure while running.
//
// Flags are checked by their names, so that a flag added later gets the same checks: a set *-file flag
// must name a readable file, a set listen or *-listen flag must be HOST:PORT.
//
// It never calls os.Exit itself except in Main, so that everything else is testable.
package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// UsageError is a problem with the command line: the process exits with code 2.
type UsageError struct {
	Err error
	// Command is the command whose --help tells how to fix it ("tunnelbench bench"); empty: the
	// program's.
	Command string
}

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error {
	return UsageError{Err: fmt.Errorf(format, args...)}
}

// ErrHelp means the user asked for help or the version, which was printed: exit 0.
var ErrHelp = flag.ErrHelp

// Parse parses args. Errors come back as a one-line UsageError: an unknown flag with the nearest
// known ones, a *-file flag naming a file that cannot be read, a *-listen flag that is not HOST:PORT.
// -h/--help prints the usage to out and --version the version line; both return ErrHelp.
func Parse(fs *flag.FlagSet, args []string, out io.Writer) error {
	_, err := ParsePositional(fs, args, out, 0)
	return err
}

// ParsePositional is Parse for commands that take up to n positional arguments, before or after the
// flags; it returns them.
func ParsePositional(fs *flag.FlagSet, args []string, out io.Writer, n int) ([]string, error) {
	usageError := func(err error) error { return UsageError{Err: redactSecrets(err, args), Command: fs.Name()} }
	var pos []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") && len(pos) < n {
		pos, args = append(pos, args[0]), args[1:]
	}
	version := addVersionFlag(fs)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			fs.Usage()
			return nil, ErrHelp
		}
		return nil, usageError(rewordParseError(fs, err))
	}
	if *version {
		program, _, _ := strings.Cut(fs.Name(), " ") // "tunnelbench bench" is tunnelbench's
		fmt.Fprintln(out, Version(program))
		return nil, ErrHelp
	}
	pos = append(pos, fs.Args()...)
	if len(pos) > n {
		return nil, usageError(fmt.Errorf("unexpected argument %q", pos[n]))
	}
	if err := errors.Join(checkFileFlags(fs), checkListenFlags(fs)); err != nil {
		return nil, usageError(err)
	}
	return pos, nil
}

// addVersionFlag gives fs --version, unless it has a flag of that name already.
func addVersionFlag(fs *flag.FlagSet) *bool {
	if fs.Lookup("version") != nil {
		return new(bool)
	}
	return fs.Bool("version", false, "print the version (module, VCS revision, Go version) and exit")
}

// SetUsage gives fs a usage text: the summary, then every flag with its default.
func SetUsage(fs *flag.FlagSet, summary string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, strings.TrimSpace(summary))
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
}

// Main runs run with a context cancelled by SIGINT or SIGTERM and exits: 0 on success or help, 2 on a
// usage error, 1 on any other error. The error is printed as one line prefixed with the program name.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	os.Exit(ExitCode(name, err, os.Stderr))
}

// ExitCode prints err for the user and returns the exit code it deserves.
func ExitCode(name string, err error, stderr io.Writer) int {
	var usage UsageError
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "%s: %v (run '%s --help' for usage)\n", name, oneLine(err), cmp.Or(usage.Command, name))
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, oneLine(err))
		return 1
	}
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// NewLogger returns a text logger on w at level ("debug", "info", "warn", "error").
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, Usagef("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// ReadSecretFile reads a file holding one secret, without surrounding whitespace. An empty file is an
// error: an empty secret would silently authenticate nothing or everything.
func ReadSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// SecretFlags are the flags whose values are secrets. The flag package quotes a bad value in its error,
// and a secret can become one: in "--min-idle --token=X", "--token=X" is the value of --min-idle.
var SecretFlags = []string{"token", "agent-token", "caller-token"}

// redactSecrets removes from err's message every value given to a SecretFlags flag in args. For
// KEY=SECRET values (--agent-token 1=TOKEN) the key stays. The error still unwraps to err.
func redactSecrets(err error, args []string) error {
	msg := err.Error()
	redacted := msg
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !slices.Contains(SecretFlags, name) {
			continue
		}
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		if _, secret, ok := strings.Cut(value, "="); ok && secret != "" {
			value = secret
		}
		redacted = redactValue(redacted, value)
	}
	if redacted == msg {
		return err
	}
	return &flagError{msg: redacted, err: err}
}

// redactValue replaces secret in msg where it stands as a value: after a quote, an '=' or a line's
// start, and before a quote, a ':', a ',', a space or a line's end, as messages show values. A short
// dev token ("a") inside words ("is a directory", "/tmp/data") is not the token and stays.
func redactValue(msg, secret string) string {
	if secret == "" {
		return msg
	}
	var b strings.Builder
	for {
		i := strings.Index(msg, secret)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		j := i + len(secret)
		before, after := byte('\n'), byte('\n')
		if i > 0 {
			before = msg[i-1]
		}
		if j < len(msg) {
			after = msg[j]
		}
		b.WriteString(msg[:i])
		if strings.IndexByte("\"=\n", before) >= 0 && strings.IndexByte("\":, \n", after) >= 0 {
			b.WriteString("<redacted>")
		} else {
			b.WriteString(secret)
		}
		msg = msg[j:]
	}
}

// SplitList splits a comma-separated flag value, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// IsSet reports whether the command line set flag name (as opposed to leaving its default).
func IsSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
