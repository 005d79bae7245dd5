package limits

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/core/tunserver/refusal"
)

// HTTPGuard bounds HTTP request headers and bodies and authorizes HTTP callers like the public API does
// (bearer token → the agents it may reach). The caller check is here, between the two bounds, because
// their order is the answer a client gets: a header too large is refused (431) before any token is read,
// and an unauthorized caller learns nothing about the body limit (401/403 before 413). The token is
// kas's: it is removed before the request goes on.
type HTTPGuard struct {
	Next http.Handler
	// Callers authorizes callers; nil lets every caller through (kas's dev mode).
	Callers auth.CallerAuthorizer
	// MaxBody and MaxHeader bound a request's body and its line and header in bytes; zero: no bound.
	MaxBody   int64
	MaxHeader int
	// OnLimit is told HTTPHeader or HTTPBody when a bound refuses a request; nil is told nothing.
	OnLimit tunserver.OnLimit
	// Refusals logs refused callers; nil logs none.
	Refusals *refusal.Log
}

func (g *HTTPGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.MaxHeader > 0 && headerSize(r) > g.MaxHeader {
		g.OnLimit.Hit(HTTPHeader)
		http.Error(w, "request header too large: the limit (--max-http-header-bytes) is "+formatBytes(int64(g.MaxHeader)), http.StatusRequestHeaderFieldsTooLarge)
		return
	}
	if g.Callers != nil {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
			g.Refusals.Refused("caller", "no caller token", "peer", r.RemoteAddr, "path", r.URL.Path)
			w.Header().Set("WWW-Authenticate", `Bearer realm="kas"`)
			http.Error(w, "missing caller token: send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		caller, err := g.Callers.AuthenticateCaller(r.Context(), token)
		if err != nil {
			g.Refusals.Refused("caller", "invalid caller token", "peer", r.RemoteAddr, "path", r.URL.Path)
			w.Header().Set("WWW-Authenticate", `Bearer realm="kas", error="invalid_token"`)
			http.Error(w, "invalid caller token", http.StatusUnauthorized)
			return
		}
		// A path ParsePath refuses goes on to the handler, which answers 400 naming the problem without
		// calling any agent (and not a 403 for the agent id 0 that an error comes with).
		if id, _, ok, err := httptunnel.ParsePath(r.URL.EscapedPath()); ok && err == nil && !caller.MayReach(id) {
			g.Refusals.Refused("caller", "agent not allowed for the caller token", "peer", r.RemoteAddr, "agent_id", id)
			http.Error(w, auth.PermissionError(id).Error(), http.StatusForbidden)
			return
		}
		r.Header.Del("Authorization")
		// The Router counts this caller's waiting calls as it does for the public API.
		r = r.WithContext(auth.WithCaller(r.Context(), caller))
	}
	if g.MaxBody > 0 {
		if r.ContentLength > g.MaxBody {
			g.OnLimit.Hit(HTTPBody)
			http.Error(w, "request body too large: the limit (--max-http-body) is "+formatBytes(g.MaxBody), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, g.MaxBody)
	}
	g.Next.ServeHTTP(w, r)
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
