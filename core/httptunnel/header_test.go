package httptunnel

import (
	"maps"
	"math/rand/v2"
	"net/http"
	"net/textproto"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// hopHeader has a field of every kind that stays on this side of the tunnel, and one that crosses.
func hopHeader() http.Header {
	return http.Header{
		"Connection":        {"X-A, x-b", "close"},
		"X-A":               {"1"},
		"X-B":               {"2"},
		"X-C":               {"3"},
		"Keep-Alive":        {"timeout=5"},
		"Te":                {"trailers"},
		"Transfer-Encoding": {"chunked"},
		"Upgrade":           {"websocket"},
		"Content-Length":    {"10"},
		"Authorization":     {"Bearer x"},
	}
}

func TestWireHeaderDropsHopByHop(t *testing.T) {
	h := hopHeader()
	got := wireHeader(h, "x-c")
	if len(got) != 1 || !reflect.DeepEqual(got["Authorization"].GetValue(), []string{"Bearer x"}) {
		t.Errorf("wireHeader = %v, want only Authorization", got)
	}
	if !reflect.DeepEqual(h, hopHeader()) {
		t.Error("wireHeader changed its input")
	}
	if got := wireHeader(http.Header{"Connection": {"close"}}); got != nil {
		t.Errorf("wireHeader of hop-by-hop fields only = %v, want nil", got)
	}
}

func TestHeaderFromWireDropsHopByHop(t *testing.T) {
	// As a hostile or older peer may send it: names in any case.
	w := map[string]*HeaderValues{
		"connection":    {Value: []string{"X-A, x-b", "close"}},
		"x-a":           {Value: []string{"1"}},
		"X-b":           {Value: []string{"2"}},
		"x-c":           {Value: []string{"3"}},
		"KEEP-ALIVE":    {Value: []string{"timeout=5"}},
		"te":            {Value: []string{"trailers"}},
		"Upgrade":       {Value: []string{"websocket"}},
		"authorization": {Value: []string{"Bearer x"}},
	}
	got := headerFromWire(w, "X-C")
	if want := (http.Header{"Authorization": {"Bearer x"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("headerFromWire = %v, want %v", got, want)
	}
}

// A value added to a converted header never reaches the header it shares values with.
func TestAddWireCopiesSharedValues(t *testing.T) {
	h := http.Header{"Via": make([]string, 1, 4)}
	h["Via"][0] = "1.1 first"
	w := addWire(wireHeader(h), "Via", "1.1 kas")
	if got := w["Via"].GetValue(); !reflect.DeepEqual(got, []string{"1.1 first", "1.1 kas"}) {
		t.Errorf("Via on the wire = %q", got)
	}
	if got := h["Via"][:2]; got[1] != "" || len(h["Via"]) != 1 {
		t.Errorf("the client's Via changed: %q", got)
	}
	if got := addWire(nil, "Via", "2 kas")["Via"].GetValue(); !reflect.DeepEqual(got, []string{"2 kas"}) {
		t.Errorf("Via added to no header = %q", got)
	}
	sent := make([]string, 1, 4)
	sent[0] = "a"
	back := headerFromWire(map[string]*HeaderValues{"via": {Value: sent}})
	back.Add("Via", "c")
	if !reflect.DeepEqual(back["Via"], []string{"a", "c"}) || sent[:2][1] != "" {
		t.Errorf("Via from the wire then added to = %q, the message's values %q", back["Via"], sent[:2])
	}
}

// cleanHeaderCopy and toWireCopy are the conversions as they were before they stopped copying: the
// reference that the ones without copies must match, field for field. fromWire changed only in sharing
// its values, not in what they are, so the reference uses it as it is.
func cleanHeaderCopy(h http.Header, extra ...string) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				out.Del(name)
			}
		}
	}
	for _, k := range hopByHop {
		out.Del(k)
	}
	for _, k := range extra {
		out.Del(k)
	}
	return out
}

func plain(w map[string]*HeaderValues) map[string][]string {
	out := map[string][]string{}
	for k, v := range w {
		out[k] = v.GetValue()
	}
	return out
}

// sortedValues makes values merged from several wire names comparable: their order follows the map's.
func sortedValues(h http.Header) http.Header {
	out := http.Header{}
	for k, vv := range h {
		s := append([]string(nil), vv...)
		slices.Sort(s)
		out[k] = s
	}
	return out
}

func TestHeaderConversionsMatchTheCopyingOnes(t *testing.T) {
	names := []string{"Connection", "connection", "Keep-Alive", "X-A", "x-a", "X-B", "Expect", "expect", "Te", "Host", "Content-Length", "Authorization", "Via", "X-Empty"}
	values := []string{"", "1", "x-a", "X-B, keep-alive", "close", " , expect ,", "a,b"}
	rng := rand.New(rand.NewPCG(14, 15))
	for i := range 2000 {
		h := http.Header{}
		for range rng.IntN(8) {
			k := names[rng.IntN(len(names))]
			n := rng.IntN(3)
			if k == "X-Empty" {
				n = 0
			}
			vv := []string{}
			for range n {
				vv = append(vv, values[rng.IntN(len(values))])
			}
			h[k] = vv
		}
		extra := []string{"Expect"}[:rng.IntN(2)]
		before := h.Clone()
		got, want := plain(wireHeader(h, extra...)), plain(toWireCopy(cleanHeaderCopy(h, extra...)))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: wireHeader(%v, %q) = %v, the copying conversion %v", i, h, extra, got, want)
		}
		if !reflect.DeepEqual(h, before) {
			t.Fatalf("case %d: wireHeader changed its input", i)
		}
		w := map[string]*HeaderValues{}
		for k, vv := range h {
			w[k] = &HeaderValues{Value: vv}
		}
		gotBack, wantBack := sortedValues(headerFromWire(w, extra...)), sortedValues(cleanHeaderCopy(fromWire(w), extra...))
		if !maps.EqualFunc(gotBack, wantBack, func(a, b []string) bool { return reflect.DeepEqual(a, b) }) {
			t.Fatalf("case %d: headerFromWire(%v, %q) = %v, the copying conversion %v", i, h, extra, gotBack, wantBack)
		}
	}
}

func toWireCopy(h http.Header) map[string]*HeaderValues {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]*HeaderValues, len(h))
	for k, vv := range h {
		out[k] = &HeaderValues{Value: vv}
	}
	return out
}
