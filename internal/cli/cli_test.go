package cli

import (
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSplitList(t *testing.T) {
	for in, want := range map[string][]string{
		"":               nil,
		" , ,":           nil,
		"a":              {"a"},
		" a, b ,,c ":     {"a", "b", "c"},
		"unary-64B,bidi": {"unary-64B", "bidi"},
	} {
		if got := SplitList(in); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
