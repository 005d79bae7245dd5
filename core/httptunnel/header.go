package httptunnel

import (
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// hopByHop are the header fields that concern one connection only (RFC 9110 section 7.6.1, and the
// older ones proxies still see). They never cross the tunnel, in either direction. Content-Length
// travels as its own field, Host as the request's.
var hopByHop = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
	"Content-Length",
	"Host",
}

// wireHeader is h in its wire form without hop-by-hop fields, without the fields that Connection names,
// and without the extra fields given; nil when none is left. It copies nothing: the wire form shares h's
// value slices (clipped, so that an append to either copies), and h must not change while the message
// may be sent.
func wireHeader(h http.Header, extra ...string) map[string]*HeaderValues {
	named := connectionNamed(h["Connection"])
	var out map[string]*HeaderValues
	for k, vv := range h {
		if dropped(k, named, extra) {
			continue
		}
		if out == nil {
			out = make(map[string]*HeaderValues, len(h))
		}
		out[k] = &HeaderValues{Value: slices.Clip(vv)}
	}
	return out
}

// addWire adds v to the field key of m, after the values there are (as http.Header.Add does), and
// returns m: a new map when m is nil.
func addWire(m map[string]*HeaderValues, key, v string) map[string]*HeaderValues {
	if m == nil {
		m = make(map[string]*HeaderValues, 1)
	}
	if hv := m[key]; hv != nil {
		hv.Value = append(slices.Clip(hv.Value), v) // a copy: the values may be shared
	} else {
		m[key] = &HeaderValues{Value: []string{v}}
	}
	return m
}

// headerFromWire converts the wire form back, as fromWire does, and drops what wireHeader drops. A
// header that a hostile or older peer sent keeps none of those fields either.
func headerFromWire(m map[string]*HeaderValues, extra ...string) http.Header {
	h := fromWire(m)
	for _, k := range connectionNamed(h["Connection"]) {
		delete(h, k)
	}
	for _, k := range hopByHop {
		delete(h, k)
	}
	for _, k := range extra {
		delete(h, textproto.CanonicalMIMEHeaderKey(k))
	}
	return h
}

// connectionNamed is the canonical names that Connection field values list.
func connectionNamed(values []string) []string {
	var named []string
	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				named = append(named, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	return named
}

// dropped reports whether the field named k (as it is keyed in an http.Header) stays on this side of the
// tunnel: hop-by-hop, named by Connection, or one of extra.
func dropped(k string, named, extra []string) bool {
	if slices.Contains(hopByHop, k) || slices.Contains(named, k) {
		return true
	}
	for _, e := range extra {
		if textproto.CanonicalMIMEHeaderKey(e) == k {
			return true
		}
	}
	return false
}

// fromWire converts the wire form back. Names are canonicalized; fields without values are dropped. The
// header shares the message's value slices (clipped): the message must not be used once it is converted.
func fromWire(m map[string]*HeaderValues) http.Header {
	out := make(http.Header, len(m))
	for k, v := range m {
		if len(v.GetValue()) == 0 {
			continue
		}
		k = http.CanonicalHeaderKey(k)
		if out[k] == nil {
			out[k] = slices.Clip(v.GetValue())
			continue
		}
		out[k] = append(out[k], v.GetValue()...)
	}
	return out
}

// viaValue is this hop's Via entry (RFC 9110 section 7.6.3): "1.1 kas", "2 kas".
func viaValue(major, minor int, pseudonym string) string {
	switch {
	case major >= 2:
		return strconv.Itoa(major) + " " + pseudonym
	case major == 1:
		return fmt.Sprintf("1.%d %s", minor, pseudonym)
	default: // not known: the tunnel's peers speak HTTP/1.1 or later
		return "1.1 " + pseudonym
	}
}

// oneLine makes s fit on one line of a plain-text error response or a log message.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const limit = 512
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return s
}
