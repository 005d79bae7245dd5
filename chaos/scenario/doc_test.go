package scenario

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tunnelbench/tunnelbench/chaos"
)

// docTypeRow is a fault type's row in doc.go: the type, then its params as a YAML flow mapping.
var docTypeRow = regexp.MustCompile(`^//\t([a-z][a-z-]*) +\{([^}]*)\}\s*$`)

// TestDocListsEveryFault: doc.go has one row per registered fault type, link and process, listing
// exactly the params the type takes, and no row for a type that does not exist.
func TestDocListsEveryFault(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for _, line := range strings.Split(string(src), "\n") {
		m := docTypeRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, dup := documented[m[1]]; dup {
			t.Errorf("doc.go lists %s twice", m[1])
		}
		var keys []string
		for _, kv := range strings.Split(m[2], ",") {
			if kv = strings.TrimSpace(kv); kv != "" {
				k, _, _ := strings.Cut(kv, ":")
				keys = append(keys, strings.TrimSpace(k))
			}
		}
		documented[m[1]] = keys
	}
	check := func(typ string, params []string, err error) {
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			return
		}
		got, ok := documented[typ]
		if !ok {
			t.Errorf("doc.go does not list fault type %s (params %v)", typ, params)
			return
		}
		delete(documented, typ)
		slices.Sort(got)
		params = slices.Sorted(slices.Values(params))
		if !slices.Equal(got, params) {
			t.Errorf("doc.go lists %s with params %v; it takes %v", typ, got, params)
		}
	}
	for _, typ := range chaos.FaultTypes() {
		params, err := chaos.FaultParams(typ)
		check(typ, params, err)
	}
	for _, typ := range chaos.ProcessTypes() {
		params, err := chaos.ProcessParams(typ)
		check(typ, params, err)
	}
	for typ := range documented {
		t.Errorf("doc.go lists %s, which is not a registered fault type", typ)
	}
}

// TestDocExamplesParse: every row's example params build their fault, so the values shown are valid.
func TestDocExamplesParse(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		m := docTypeRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		p := chaos.Params{}
		for _, kv := range strings.Split(m[2], ",") {
			if k, v, ok := strings.Cut(kv, ":"); ok {
				p[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		if slices.Contains(chaos.FaultTypes(), m[1]) {
			_, err = chaos.NewFault(m[1], p)
		} else {
			_, err = chaos.NewProcess(m[1], p)
		}
		if err != nil {
			t.Errorf("doc.go's example for %s: %v", m[1], err)
		}
	}
}
