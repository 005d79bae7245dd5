// Package repeats remembers, for a second, the calls that failed for want of a tunnel (the find
// timeout, or an agent that does not serve the method), so that the same call from the same client
// connection gets the same answer at once while the agent is seen as it was then. It never waits, routes
// or holds a call; what it remembers is bounded (maxRepeats).
package repeats

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
)

// Window is how long after a call failed for want of a tunnel (the find timeout, or the agent
// does not serve the method) the same call from the same client connection gets the same answer at
// once, as long as this kas sees the agent as it did then. Clients that try again at once would
// otherwise wait again: grpcurl's reflection client makes three attempts, and waited three find
// timeouts for an agent that is not connected. A person who runs the command again waits again (a new
// connection).
const Window = time.Second

// maxRepeats bounds what the router remembers; past it, failures are not remembered.
const maxRepeats = 4096

type repeatKey struct {
	peer    string
	agentID int64
	method  string
}

type repeatVerdict struct {
	err      error
	presence presence.Presence
	at       time.Time
}

// Memory remembers the latest failures for Window.
type Memory struct {
	presence func(agentID int64, service, method string) presence.Presence
	// latest is when the newest failure was remembered (UnixNano): while it is older than
	// Window, nothing is remembered and calls skip the map (and the peer's address string).
	latest atomic.Int64
	mu     sync.Mutex
	m      map[repeatKey]repeatVerdict
}

func New(presence func(agentID int64, service, method string) presence.Presence) *Memory {
	return &Memory{presence: presence, m: map[repeatKey]repeatVerdict{}}
}

// key is the call's key; ok is false for calls that are never remembered: without Presence, and from
// callers without a peer address (callers in kas's process).
func (r *Memory) key(ctx context.Context, c call.Call) (repeatKey, bool) {
	if r.presence == nil {
		return repeatKey{}, false
	}
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return repeatKey{}, false
	}
	return repeatKey{peer: p.Addr.String(), agentID: c.AgentID, method: c.FullMethod}, true
}

// Lookup returns the remembered answer to a call that repeats a recent failure, or nil.
func (r *Memory) Lookup(ctx context.Context, c call.Call) error {
	if time.Since(time.Unix(0, r.latest.Load())) >= Window {
		return nil
	}
	k, ok := r.key(ctx, c)
	if !ok {
		return nil
	}
	r.mu.Lock()
	v, found := r.m[k]
	r.mu.Unlock()
	if !found || time.Since(v.at) >= Window || r.presence(c.AgentID, c.Service, c.Method) != v.presence {
		return nil
	}
	st := status.Convert(v.err)
	return status.Errorf(st.Code(), "%s (the same call from this client failed %s ago; kas did not wait again)",
		st.Message(), time.Since(v.at).Round(time.Millisecond))
}

// Remember records a failure for want of a tunnel: the find timeout, or the agent does not serve the
// method.
func (r *Memory) Remember(ctx context.Context, c call.Call, err error) {
	k, ok := r.key(ctx, c)
	if !ok {
		return
	}
	v := repeatVerdict{err: err, presence: r.presence(c.AgentID, c.Service, c.Method), at: time.Now()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= maxRepeats {
		for key, old := range r.m {
			if time.Since(old.at) >= Window {
				delete(r.m, key)
			}
		}
		if len(r.m) >= maxRepeats {
			return
		}
	}
	r.m[k] = v
	r.latest.Store(v.at.UnixNano())
}
