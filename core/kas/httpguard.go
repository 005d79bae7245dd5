package kas

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/core/tunserver/refusal"
)

// httpGuard authorizes HTTP callers like the public API does (bearer token → the agents it may reach)
// and bounds request bodies. The token is kas's: it is removed before the request goes on.
type httpGuard struct {
	next      http.Handler
	callers   auth.CallerAuthorizer
	maxBody   int64
	maxHeader int
	onLimit   func(string)
	refusals  *refusal.Log
}

func (g *httpGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.maxHeader > 0 && headerSize(r) > g.maxHeader {
		g.onLimit(limitHTTPHeader)
		http.Error(w, "request header too large: the limit (--max-http-header-bytes) is "+formatBytes(int64(g.maxHeader)), http.StatusRequestHeaderFieldsTooLarge)
		return
	}
	if g.callers != nil {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
			g.refusals.Refused("caller", "no caller token", "peer", r.RemoteAddr, "path", r.URL.Path)
			w.Header().Set("WWW-Authenticate", `Bearer realm="kas"`)
			http.Error(w, "missing caller token: send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		caller, err := g.callers.AuthenticateCaller(r.Context(), token)
		if err != nil {
			g.refusals.Refused("caller", "invalid caller token", "peer", r.RemoteAddr, "path", r.URL.Path)
			w.Header().Set("WWW-Authenticate", `Bearer realm="kas", error="invalid_token"`)
			http.Error(w, "invalid caller token", http.StatusUnauthorized)
			return
		}
		// A path ParsePath refuses goes on to the handler, which answers 400 naming the problem without
		// calling any agent (and not a 403 for the agent id 0 that an error comes with).
		if id, _, ok, err := httptunnel.ParsePath(r.URL.EscapedPath()); ok && err == nil && !caller.MayReach(id) {
			g.refusals.Refused("caller", "agent not allowed for the caller token", "peer", r.RemoteAddr, "agent_id", id)
			http.Error(w, auth.PermissionError(id).Error(), http.StatusForbidden)
			return
		}
		r.Header.Del("Authorization")
		// The Router counts this caller's waiting calls as it does for the public API.
		r = r.WithContext(auth.WithCaller(r.Context(), caller))
	}
	if g.maxBody > 0 {
		if r.ContentLength > g.maxBody {
			g.onLimit(limitHTTPBody)
			http.Error(w, "request body too large: the limit (--max-http-body) is "+formatBytes(g.maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, g.maxBody)
	}
	g.next.ServeHTTP(w, r)
}

// headerSize is about the bytes of r's request line and header on the wire (HTTP/1.1 framing).
func headerSize(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n + len(r.Host) + 8
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return itoa(n>>30) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	default:
		return itoa(n) + " bytes"
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
