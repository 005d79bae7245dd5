package dashboards_test

import (
	"bufio"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

var update = flag.Bool("update", false, "rewrite testdata/metrics.golden from the live components")

const goldenFile = "testdata/metrics.golden"

const goldenHeader = `# The metric families the dashboards query: name, type, and the scrape jobs exposing them (as a live
# kas, agentk and harness do). Regenerate: go test ./dashboards -run TestMetricsGolden -update
`

// queriedNames is every metric name the committed dashboards query.
func queriedNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, q := range allQueries(t) {
		names = append(names, metricNames(q.expr)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestMetricsGolden compares the families the dashboards query, as live components expose them, with
// the golden file: a renamed metric, a changed type, or a dashboard querying something new fails here.
func TestMetricsGolden(t *testing.T) {
	e := startEnv(t)
	ctx := t.Context()
	for range 3 {
		if err := e.callAndRecord(ctx, "golden", 1); err != nil {
			t.Fatal(err)
		}
	}
	e.timeoutCall(t, ctx, "golden")
	e.hm.Fault("golden", "agent-kas", "latency", true)
	e.hm.Recovery("golden", time.Second)
	e.hm.Call("golden", time.Millisecond, codes.Unavailable)

	found, missing := liveFamilies(queriedNames(t), e.families(t))
	for _, n := range missing {
		t.Errorf("the dashboards query %s, which no component exposes", n)
	}
	var b strings.Builder
	b.WriteString(goldenHeader)
	for _, f := range found {
		b.WriteString(f.String() + "\n")
	}
	if *update {
		if err := os.WriteFile(goldenFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("metric families differ from %s (rerun with -update if the change is intended; dashboards "+
			"and their users depend on these names)\ngot:\n%s\nwant:\n%s", goldenFile, got, want)
	}
}

// goldenTypes reads the golden file: family name -> type.
func goldenTypes(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			t.Fatalf("%s: bad line %q", goldenFile, line)
		}
		out[fields[0]] = fields[1]
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestQueriedMetricsAreGolden checks that every metric name a query uses belongs to a golden family,
// without starting anything.
func TestQueriedMetricsAreGolden(t *testing.T) {
	golden := goldenTypes(t)
	typeOf := func(name string) string { return golden[name] }
	for _, q := range allQueries(t) {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%v: no metric name found", q)
		}
		for _, n := range names {
			if _, ok := resolve(n, typeOf); !ok {
				t.Errorf("%v: %s is not in %s", q, n, goldenFile)
			}
		}
	}
}
