package dashboards_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/dashboards"
)

// query is one PromQL expression of a committed dashboard: a panel target, an annotation, or the
// metric of a label_values() variable.
type query struct {
	dashboard string
	where     string // panel title, "annotation NAME" or "variable NAME"
	expr      string
	// labelValues is set for a variable: label_values(expr, labelValues).
	labelValues string
	// instant is set for targets that Grafana evaluates once rather than over the time range.
	instant bool
}

func (q query) String() string { return fmt.Sprintf("%s / %s: %s", q.dashboard, q.where, q.expr) }

// readDashboard reads a committed dashboard file as Grafana would: plain JSON.
func readDashboard(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return d
}

// panels is every panel of d, including those inside collapsed rows.
func panels(d map[string]any) []map[string]any {
	var out []map[string]any
	for _, p := range list(d["panels"]) {
		pm := p.(map[string]any)
		out = append(out, pm)
		for _, inner := range list(pm["panels"]) {
			out = append(out, inner.(map[string]any))
		}
	}
	return out
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

var labelValuesRE = regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// allQueries extracts every query from the committed dashboard files.
func allQueries(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, db := range dashboards.All() {
		d := readDashboard(t, db.File)
		for _, p := range panels(d) {
			for _, tg := range list(p["targets"]) {
				tm := tg.(map[string]any)
				expr := str(tm["expr"])
				if expr == "" {
					t.Errorf("%s / %s: target %s has no expr", db.File, str(p["title"]), str(tm["refId"]))
					continue
				}
				inst, _ := tm["instant"].(bool)
				out = append(out, query{dashboard: db.File, where: str(p["title"]), expr: expr, instant: inst})
			}
		}
		annotations, _ := d["annotations"].(map[string]any)
		for _, a := range list(annotations["list"]) {
			am := a.(map[string]any)
			if expr := str(am["expr"]); expr != "" {
				out = append(out, query{dashboard: db.File, where: "annotation " + str(am["name"]), expr: expr})
			}
		}
		templating, _ := d["templating"].(map[string]any)
		for _, v := range list(templating["list"]) {
			vm := v.(map[string]any)
			if str(vm["type"]) != "query" {
				continue
			}
			where := "variable " + str(vm["name"])
			m := labelValuesRE.FindStringSubmatch(str(vm["query"]))
			if m == nil {
				t.Errorf("%s / %s: query %q is not label_values(metric, label)", db.File, where, vm["query"])
				continue
			}
			out = append(out, query{dashboard: db.File, where: where, expr: m[1], labelValues: m[2]})
		}
	}
	if len(out) == 0 {
		t.Fatal("no queries in the dashboards")
	}
	return out
}

// rateInterval stands for $__rate_interval in tests: the test Prometheus scrapes every second, so five
// seconds hold several samples.
const rateInterval = "5s"

// grafanaVars are the values tests give the variables that queries use. Multi-value variables become
// the regular expression of "All".
var grafanaVars = map[string]string{
	"__rate_interval": rateInterval,
	"__interval":      "1s",
	"__range":         "1m",
	"kas":             ".+",
	"scenario":        ".+",
}

var varRE = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|\$([a-zA-Z_][a-zA-Z0-9_]*)`)

// substitute replaces Grafana variables in expr by test values; an unknown variable is an error.
func substitute(expr string) (string, error) {
	var unknown []string
	out := varRE.ReplaceAllStringFunc(expr, func(m string) string {
		sub := varRE.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		v, ok := grafanaVars[name]
		if !ok {
			unknown = append(unknown, name)
			return m
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown Grafana variables %v in %s", unknown, expr)
	}
	return out, nil
}

var (
	stringRE   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	matchersRE = regexp.MustCompile(`\{[^}]*\}`)
	rangeRE    = regexp.MustCompile(`\[[^\]]*\]`)
	groupingRE = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// tokenRE finds identifiers, and numbers with their duration or exponent so that neither looks like
	// an identifier.
	tokenRE = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*|(?:[0-9]*\.)?[0-9]+(?:[eE][+-]?[0-9]+)?[a-zA-Z]*`)
)

var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
}

// metricNames returns the metric names a PromQL expression selects, sorted and without duplicates. It is
// a small lexer, not a parser: good for the expressions dashboards use (selectors, functions,
// aggregations with grouping, binary operators), and TestMetricNames pins what it understands.
func metricNames(expr string) []string {
	s := stringRE.ReplaceAllString(expr, `""`)
	s = matchersRE.ReplaceAllString(s, " ")
	s = rangeRE.ReplaceAllString(s, " ")
	s = groupingRE.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range tokenRE.FindAllStringIndex(s, -1) {
		tok := s[loc[0]:loc[1]]
		if tok[0] >= '0' && tok[0] <= '9' || tok[0] == '.' || promqlWords[strings.ToLower(tok)] {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		names = append(names, tok)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`tunnel_tunnels`: {"tunnel_tunnels"},
		`histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{x="y",le!="1"}[$__rate_interval])))`:    {"a_seconds_bucket"},
		`sum(rate(a_total{c!="OK"}[5m])) by (c) / sum (rate(b_total[1m])) > 0`:                               {"a_total", "b_total"},
		`max by (link, fault) (f{s=~"$s", t="a{b}"}) > 1e-09 or on (x) group_left (y) g offset 5m`:           {"f", "g"},
		`sum without (instance) (increase(c_total{l="rate(x)"}[$__range])) * 2.5 + count(up == bool 1)`:      {"c_total", "up"},
		`label_replace(m1, "dst", "$1", "src", "(.*)") unless ignoring (le) m2:recorded and sum(m3) by (le)`: {"m1", "m2:recorded", "m3"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %v, want %v", expr, got, want)
		}
	}
}

func TestSubstitute(t *testing.T) {
	got, err := substitute(`rate(x{i=~"$kas",s=~"${scenario}"}[$__rate_interval])`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `rate(x{i=~".+",s=~".+"}[5s])`; got != want {
		t.Errorf("substitute = %s, want %s", got, want)
	}
	if _, err := substitute(`x{a="$nope"}`); err == nil {
		t.Error("unknown variable accepted")
	}
}
