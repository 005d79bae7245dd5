package demo

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tunnelbench/tunnelbench/internal/cli"
)

func TestParseServerArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, DefaultServerListen},
		{[]string{"--listen", ":9000"}, ":9000"},
		{[]string{"--listen=0.0.0.0:1"}, "0.0.0.0:1"},
	} {
		a, err := ParseServerArgs(c.args, nil)
		if err != nil || a.Listen != c.want {
			t.Errorf("%q: %+v, %v; want %s", c.args, a, err, c.want)
		}
	}
	for _, args := range [][]string{{"--lisen", ":1"}, {"extra"}} {
		if _, err := ParseServerArgs(args, nil); !errors.As(err, new(cli.UsageError)) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	var help bytes.Buffer
	if _, err := ParseServerArgs([]string{"-h"}, &help); !errors.Is(err, cli.ErrHelp) || help.Len() == 0 {
		t.Errorf("-h: %v, %q", err, help.String())
	}
}
