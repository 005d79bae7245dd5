package routing

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
)

// Eager gateway defaults.
const (
	// DefaultEagerTTL is how long the finder remembers the gateway where it last found an agent's tunnel.
	// An agent that moved costs one no_tunnel answer, so it need not be short; it bounds how long a
	// gateway that went quiet is asked first.
	DefaultEagerTTL = 10 * time.Second
	// maxEagerAgents bounds the memory: only agents found at a gateway are remembered, and past this many
	// new ones are not.
	maxEagerAgents = 100_000
)

// errEagerMissed: the eager gateway had no idle tunnel and read nothing; the call goes through the usual
// search.
var errEagerMissed = errors.New("the eager gateway had no tunnel")

// lastGateways remembers, per agent, the gateway kas where a find last won, when that gateway serves
// eager streams (it said so in its response header).
type lastGateways struct {
	ttl time.Duration

	mu sync.Mutex
	m  map[int64]lastGateway
}

type lastGateway struct {
	url string
	// hop: the gateway announced hop streams (rpc.GatewayReuseKey); whether a call rides one is the
	// finder's to say.
	hop   bool
	until time.Time
}

func newLastGateways(ttl time.Duration) *lastGateways {
	return &lastGateways{ttl: ttl, m: map[int64]lastGateway{}}
}

func (l *lastGateways) get(agentID int64) (lastGateway, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.m[agentID]
	if !ok {
		return lastGateway{}, false
	}
	if time.Now().After(g.until) {
		delete(l.m, agentID)
		return lastGateway{}, false
	}
	return g, true
}

func (l *lastGateways) remember(agentID int64, url string, hop bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.m[agentID]; !ok && len(l.m) >= maxEagerAgents {
		l.sweepLocked()
		if len(l.m) >= maxEagerAgents {
			return
		}
	}
	l.m[agentID] = lastGateway{url: url, hop: hop, until: time.Now().Add(l.ttl)}
}

// forget drops agentID's gateway if it is still url.
func (l *lastGateways) forget(agentID int64, url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g, ok := l.m[agentID]; ok && g.url == url {
		delete(l.m, agentID)
	}
}

func (l *lastGateways) sweepLocked() {
	now := time.Now()
	for id, g := range l.m {
		if now.After(g.until) {
			delete(l.m, id)
		}
	}
}

// eagerGateway asks the gateway where the agent's tunnel was found last time, alone and without a find:
// the call's frames go with the stream's opening (no more than the replay limit until the gateway
// takes the call), so the second hop costs no round trip when the gateway has an idle tunnel. When it has
// none it answers no_tunnel having read nothing, and the call is replayed through the usual search.
type eagerGateway struct {
	f   *Finder
	url string
	// hop: the gateway serves hop streams, and the call rides one (see hopPool).
	hop    bool
	req    FindRequest
	cancel context.CancelFunc
	// ready is called when the gateway took the call (the routing metrics' "found").
	ready func()
}

func (g *eagerGateway) URL() string { return g.url }

func (g *eagerGateway) Release() {
	if g.cancel != nil {
		g.cancel()
	}
}

func (g *eagerGateway) Forward(ctx context.Context, pump *request.Pump, w *callerWriter) error {
	md := call.ToGateway(g.req.Metadata)
	if g.f.cfg.EagerV1 {
		md.Set(rpc.GatewayEagerKey, "1")
	} else {
		md.Set(rpc.GatewayEagerKey, rpc.GatewayEagerV2)
	}
	var cs grpc.ClientStream
	// end ends the gateway's answer where the call stops early (no_tunnel): the stream, or on a hop
	// stream what is left of the call up to its call_end.
	var end func()
	if g.hop {
		hc, err := g.startHop(ctx, md)
		if hc != nil {
			defer hc.release() // after the pump's Detach below: nothing of this call is sent any more
		}
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return g.missed()
		}
		cs, end = hc, hc.awaitEnd
	} else {
		conn, err := g.f.cfg.Dialer.Conn(g.url)
		if err != nil {
			return g.missed()
		}
		sctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, md))
		g.cancel = cancel
		cs, err = conn.NewStream(sctx, grpctool.BidiStreamDesc, g.req.FullMethod, grpctool.RawCallCodec())
		if err != nil {
			// Nothing was sent: the connection is down or refused the stream.
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return g.missed()
		}
		end = cancel
	}
	// A failed attach means the stream is over: RecvMsg says how.
	_ = pump.AttachProvisional(&gatewayTarget{cs: cs})
	defer pump.Detach()
	checker := rpc.NewChecker(rpc.GatewayToRoutingEager)
	in := &rpc.GatewayReceiver{Stream: cs, Batches: !g.f.cfg.EagerV1}
	m, _, err := in.RecvPooled()
	if err != nil {
		g.f.lastGW.forget(g.req.AgentID, g.url)
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		if err == io.EOF {
			return status.Error(codes.Unavailable, "gateway kas ended the call without an answer")
		}
		if (err == errHopNotStarted || len(cs.Trailer().Get(rpc.GatewayRetryTrailerKey)) > 0) && pump.Detach() {
			// The gateway did not take the call (it drained its hop stream), or took it with a late
			// tunnel_ready and its tunnel went away before the call started there.
			return g.missed()
		}
		// The gateway may have started the call: it is not replayed.
		return err
	}
	if err := checker.Next(rpc.GatewayState(m)); err != nil {
		g.f.lastGW.forget(g.req.AgentID, g.url)
		return status.Errorf(codes.Unavailable, "gateway kas broke the protocol: %v", status.Convert(err).Message())
	}
	if checker.State() == rpc.StateNoTunnel {
		end()
		if !pump.Detach() {
			// Not reached: a provisional target never outgrows the replay log.
			return status.Error(codes.Internal, "the call could not be replayed after the gateway had no tunnel")
		}
		return g.missed()
	}
	pump.Confirm()
	g.f.lastGW.remember(g.req.AgentID, g.url, g.hop)
	if g.ready != nil {
		g.ready()
	}
	return relayGateway(ctx, w, in, pump, checker)
}

// startHop starts the call on a hop stream to the gateway. A stream that could not take the call is
// ended, and the call goes through the usual search (nothing reached the gateway).
func (g *eagerGateway) startHop(ctx context.Context, md metadata.MD) (*hopCall, error) {
	h, err := g.f.hops.get(ctx, g.url)
	if err != nil {
		return nil, err
	}
	return h.start(ctx, g.req.FullMethod, md)
}

func (g *eagerGateway) missed() error {
	g.f.lastGW.forget(g.req.AgentID, g.url)
	return errEagerMissed
}

// eagerOK reports whether a gateway stream's response header announces eager streams, and hop streams.
func eagerOK(cs grpc.ClientStream) (eager, hop bool) {
	h, err := cs.Header()
	if err != nil || len(h.Get(rpc.GatewayEagerKey)) == 0 {
		return false, false
	}
	return true, len(h.Get(rpc.GatewayReuseKey)) > 0
}
