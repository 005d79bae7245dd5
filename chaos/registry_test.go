package chaos

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFaultTypes(t *testing.T) {
	want := []string{"bandwidth", "blackhole", "latency", "limit-data", "link-down", "reset-peer", "slow-close"}
	if got := FaultTypes(); !slices.Equal(got, want) {
		t.Errorf("FaultTypes() = %v; want %v", got, want)
	}
	want = []string{"kill-agents", "kill-kas", "restart-agents", "start-redis", "stop-kas", "stop-redis"}
	if got := ProcessTypes(); !slices.Equal(got, want) {
		t.Errorf("ProcessTypes() = %v; want %v", got, want)
	}
}

func TestNewFault(t *testing.T) {
	f := newFault(t, "latency", Params{"latency": "100ms", "jitter": "20ms", "direction": "downstream"})
	if l := f.(*Latency); l.Latency != 100*time.Millisecond || l.Jitter != 20*time.Millisecond || l.Direction != Downstream {
		t.Errorf("latency: %+v", l)
	}
	if b := newFault(t, "bandwidth", Params{"rate": "2MB/s"}).(*Bandwidth); b.Rate != 2000 || b.Direction != Both {
		t.Errorf("bandwidth: %+v", b)
	}
	if l := newFault(t, "limit-data", Params{"bytes": "16KiB"}).(*LimitData); l.Bytes != 16<<10 {
		t.Errorf("limit-data: %+v", l)
	}
	if r := newFault(t, "reset-peer", Params{"timeout": "1s", "direction": "upstream"}).(*ResetPeer); r.Timeout != time.Second || r.Direction != Upstream {
		t.Errorf("reset-peer: %+v", r)
	}
	// Unbuilt values fail instead of adding a nameless toxic.
	if err := new(Latency).Apply(t.Context(), nil); !errors.Is(err, errUnbuilt) {
		t.Errorf("unbuilt fault: %v", err)
	}
}

func TestNewFaultErrors(t *testing.T) {
	for _, tc := range []struct {
		typ    string
		params Params
		want   []string // every ParamError, as "key: message" substrings
	}{
		{"latenzy", nil, []string{`unknown fault type "latenzy" (want one of "bandwidth", "blackhole", "latency"`}},
		{"latency", nil, []string{"latency: required (a duration such as 100ms)"}},
		{"latency", Params{"latency": "10x"}, []string{`latency: bad duration "10x" (want e.g. 100ms or 2s)`}},
		{"latency", Params{"latency": "-1s"}, []string{"latency: must not be negative, got -1s"}},
		{"latency", Params{"latency": "0s"}, []string{"latency: must be above zero"}},
		{"latency", Params{"latency": "1500us"}, []string{"latency: 1500us is finer than toxiproxy's millisecond"}},
		{"latency", Params{"latency": "10ms", "jitter": "20ms"}, []string{"jitter: 20ms is more than the latency 10ms"}},
		{"latency", Params{"latency": "10ms", "direction": "sideways", "jiter": "1ms"}, []string{
			`direction: unknown direction "sideways" (want upstream, downstream or both)`,
			"jiter: unknown param (want one of latency, jitter, direction)",
		}},
		{"bandwidth", Params{"rate": "100"}, []string{`rate: bad rate "100" (want a whole number of KB/s or MB/s above zero, e.g. 500KB/s)`}},
		{"bandwidth", Params{"rate": "0KB/s"}, []string{`rate: bad rate "0KB/s"`}},
		{"bandwidth", nil, []string{"rate: required"}},
		{"slow-close", Params{}, []string{"delay: required"}},
		{"blackhole", Params{"close_after": "soon"}, []string{`close_after: bad duration "soon"`}},
		{"limit-data", Params{"bytes": "0"}, []string{"bytes: must be above zero"}},
		{"limit-data", Params{"bytes": "lots"}, []string{`bytes: bad size "lots" (want e.g. 64, 16KiB or 1MiB)`}},
		{"link-down", Params{"for": "1s"}, []string{"for: unknown param (want no params)"}},
	} {
		_, err := NewFault(tc.typ, tc.params)
		if err == nil {
			t.Errorf("NewFault(%s, %v) succeeded; want %q", tc.typ, tc.params, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("NewFault(%s, %v) = %q; want it to contain %q", tc.typ, tc.params, err, w)
			}
		}
		if strings.HasPrefix(tc.typ, "latenzy") {
			continue
		}
		// Every problem names its key so that a loader can point at the line.
		var joined interface{ Unwrap() []error }
		if !errors.As(err, &joined) {
			t.Errorf("NewFault(%s) error is not a joined list: %T", tc.typ, err)
			continue
		}
		for _, e := range joined.Unwrap() {
			var pe *ParamError
			if !errors.As(e, &pe) || pe.Key == "" {
				t.Errorf("NewFault(%s): %q is not a ParamError with a key", tc.typ, e)
			}
		}
	}
}

func TestNewProcessErrors(t *testing.T) {
	for _, tc := range []struct {
		typ    string
		params Params
		want   string
	}{
		{"kill-kass", nil, `unknown process fault type "kill-kass"`},
		{"kill-kas", Params{"signal": "9"}, "signal: unknown param (want no params)"},
		{"restart-agents", Params{"mode": "rolling"}, "interval: required"},
		{"restart-agents", Params{"interval": "1s"}, "interval: only a rolling restart has an interval"},
		{"restart-agents", Params{"mode": "random"}, `mode: unknown mode "random" (want together or rolling)`},
		{"stop-redis", Params{"x": "1"}, "x: unknown param"},
	} {
		if _, err := NewProcess(tc.typ, tc.params); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewProcess(%s, %v) = %v; want %q", tc.typ, tc.params, err, tc.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"64": 64, "64B": 64, "16KiB": 16 << 10, "1MiB": 1 << 20, "2k": 2 << 10, " 3MB ": 3 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5KiB", "KiB", "1GiB", "99999999999999999MiB", "0x10"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded", in)
		}
	}
}

func TestParseLinkAndDirection(t *testing.T) {
	for _, l := range Links {
		if got, err := ParseLink(string(l)); err != nil || got != l {
			t.Errorf("ParseLink(%q) = %q, %v", l, got, err)
		}
	}
	if _, err := ParseLink("agent->redis"); err == nil || !strings.Contains(err.Error(), `unknown link "agent->redis" (want "caller->kas", "agent->kas", "kas->kas", "kas->redis")`) {
		t.Errorf("ParseLink: %v", err)
	}
	if _, err := ParseDirection("Both"); err == nil {
		t.Error("directions are lower case")
	}
}

// TestParamNames: every registered type lists the params its constructor reads, and only those.
func TestParamNames(t *testing.T) {
	want := map[string][]string{
		"latency": {"latency", "jitter", "direction"}, "bandwidth": {"direction", "rate"},
		"blackhole": {"close_after", "direction"}, "limit-data": {"bytes", "direction"}, "link-down": nil,
		"reset-peer": {"timeout", "direction"}, "slow-close": {"delay", "direction"},
	}
	for _, typ := range FaultTypes() {
		got, err := FaultParams(typ)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		if w, ok := want[typ]; !ok || !slices.Equal(got, w) {
			t.Errorf("%s params %q, want %q", typ, got, w)
		}
	}
	for _, typ := range ProcessTypes() {
		got, err := ProcessParams(typ)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		if w := map[string][]string{"restart-agents": {"mode", "interval"}}[typ]; !slices.Equal(got, w) {
			t.Errorf("%s params %q, want %q", typ, got, w)
		}
	}
	if _, err := FaultParams("nope"); err == nil {
		t.Error("FaultParams of an unknown type: no error")
	}
}
