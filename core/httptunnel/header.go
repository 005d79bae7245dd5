package httptunnel

import (
	"fmt"
	"net/http"
	"net/textproto"
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

// cleanHeader returns a copy of h without hop-by-hop fields, without the fields that Connection names,
// and without the extra fields given.
func cleanHeader(h http.Header, extra ...string) http.Header {
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

// toWire converts header fields to their wire form.
func toWire(h http.Header) map[string]*HeaderValues {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]*HeaderValues, len(h))
	for k, vv := range h {
		out[k] = &HeaderValues{Value: vv}
	}
	return out
}

// fromWire converts the wire form back. Names are canonicalized; fields without values are dropped.
func fromWire(m map[string]*HeaderValues) http.Header {
	out := make(http.Header, len(m))
	for k, v := range m {
		if len(v.GetValue()) == 0 {
			continue
		}
		k = http.CanonicalHeaderKey(k)
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
