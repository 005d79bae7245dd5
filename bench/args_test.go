package bench

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/internal/cli"
)

// TestParseArgs: the command line tunnelbench bench runs, as deploy/ checks it without running it.
func TestParseArgs(t *testing.T) {
	a, plan, err := ParseArgs([]string{"--target", "kas:8153", "--target-agent", "7", "--target-direct", "demo:9000", "--out", "/results/latest"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Out != "/results/latest" || a.MetricsListen != "" || a.Config.Target != "kas:8153" {
		t.Errorf("args %+v", a)
	}
	if plan.Options.Topology.Target != "kas:8153" || plan.Options.AgentID != 7 || plan.ScaleSteps != nil {
		t.Errorf("plan %+v", plan.Options.Topology)
	}

	a, _, err = ParseArgs(nil, nil)
	if err != nil || a.Out != DefaultOut || a.Config.Transport != TransportTCP {
		t.Errorf("defaults: %+v, %v", a, err)
	}

	for _, args := range [][]string{
		{"--transport", "pigeon"},
		{"--target", "kas:8153", "--processes"},
		{"--no-such-flag"},
		{"stray"},
	} {
		if _, _, err := ParseArgs(args, nil); !errors.As(err, new(cli.UsageError)) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}

	var help bytes.Buffer
	if _, _, err := ParseArgs([]string{"--help"}, &help); !errors.Is(err, cli.ErrHelp) || !strings.Contains(help.String(), "-target-direct") {
		t.Errorf("--help: %v\n%s", err, help.String())
	}
}
