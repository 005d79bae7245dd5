package kas_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/kas"
)

func TestUnservedGraceFlag(t *testing.T) {
	parse := func(extra ...string) (kas.Config, error) {
		return kas.ParseArgs(append([]string{"--agent-token", "1=one", "--dev"}, extra...), &bytes.Buffer{}, &bytes.Buffer{})
	}
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, time.Second},
		{[]string{"--unserved-grace", "250ms"}, 250 * time.Millisecond},
		{[]string{"--unserved-grace", "0"}, -1}, // Config: negative waits the find timeout
	} {
		cfg, err := parse(c.args...)
		if err != nil || cfg.UnservedGrace != c.want {
			t.Errorf("%v: grace %v, %v; want %v", c.args, cfg.UnservedGrace, err, c.want)
		}
	}
	if _, err := parse("--unserved-grace", "-1s"); err == nil || !strings.Contains(err.Error(), "--unserved-grace must not be negative") {
		t.Fatalf("negative grace: %v", err)
	}
	var help bytes.Buffer
	_, _ = kas.ParseArgs([]string{"--help"}, &help, &bytes.Buffer{})
	if !strings.Contains(help.String(), "-unserved-grace") {
		t.Fatalf("--help does not list --unserved-grace:\n%s", help.String())
	}
}
