package dashboards_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tunnelbench/tunnelbench/internal/testtier"
)

// Where Debian's prometheus package installs the binaries (.ci/run installs it).
const (
	promtoolBin   = "/usr/bin/promtool"
	prometheusBin = "/usr/bin/prometheus"
)

// requireBinary skips the test under -short (testtier), and otherwise fails when a Prometheus binary is
// missing.
func requireBinary(t *testing.T, path string) {
	t.Helper()
	testtier.Full(t, "needs "+path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is required: apt-get install -y prometheus (%v)", path, err)
	}
}

// promtool runs promtool with args, bounded, and returns its combined output.
func promtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	requireBinary(t, promtoolBin)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtoolBin, args...).CombinedOutput()
	return string(out), err
}

// TestQueriesAreValidPromQL has promtool parse every dashboard query, as recording rules.
func TestQueriesAreValidPromQL(t *testing.T) {
	requireBinary(t, promtoolBin)
	queries := allQueries(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	var index strings.Builder
	for i, q := range queries {
		expr, err := substitute(q.expr)
		if err != nil {
			t.Errorf("%v: %v", q, err)
			continue
		}
		name := fmt.Sprintf("dashboard:query_%d", i)
		rules = append(rules, rule{Record: name, Expr: expr})
		fmt.Fprintf(&index, "%s = %v\n", name, q)
	}
	file := map[string]any{"groups": []map[string]any{{"name": "dashboards", "rules": rules}}}
	b, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboards.rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, "check", "rules", path); err != nil {
		t.Errorf("promtool check rules: %v\n%s\nrules:\n%s", err, out, index.String())
	}
}

// TestPrometheusConfig has promtool check the shipped scrape configuration.
func TestPrometheusConfig(t *testing.T) {
	if out, err := promtool(t, "check", "config", "prometheus.yml"); err != nil {
		t.Errorf("promtool check config prometheus.yml: %v\n%s", err, out)
	}
}
