// Package agentapi serves ReverseTunnel.Connect, where agents open tunnels: it authenticates the agent,
// admits the stream against the agent's limits, reads the descriptor within the handshake timeout and
// hands the tunnel to the registry. It never admits a stream it has not counted.
package agentapi

import (
	"cmp"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/core/tunserver/refusal"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
)

// AgentAPI serves ReverseTunnel.Connect: it authenticates the agent, reads the descriptor and hands the
// tunnel to the registry until the tunnel is done.
type AgentAPI struct {
	rpc.UnimplementedReverseTunnelServer

	auth        auth.AgentAuthenticator
	registry    *registry.Registry
	descriptors descriptorCache
	rates       tunnelRates
	maxAge      time.Duration
	// handshakeTimeout bounds the wait for the descriptor; zero means DefaultHandshakeTimeout.
	handshakeTimeout time.Duration
	maxSend          int
	singleUse        bool
	noBatches        bool
	log              *slog.Logger
	refusals         *refusal.Log
}

// New returns the Connect handler. maxConnectionAge > 0 gives every tunnel stream its own
// deadline (see TunnelDeadline); 0 lets idle tunnels live as long as their connection.
func New(authn auth.AgentAuthenticator, reg *registry.Registry, maxConnectionAge time.Duration, log *slog.Logger) (*AgentAPI, error) {
	if authn == nil {
		return nil, errors.New("agent API: an agent authenticator is required")
	}
	if reg == nil {
		return nil, errors.New("agent API: registry is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &AgentAPI{auth: authn, registry: reg, maxAge: maxConnectionAge, log: log, refusals: refusal.New(log, 0)}, nil
}

// SetMaxDescriptorBytes bounds the encoded descriptor an agent may send (DefaultMaxDescriptorBytes when
// zero). Set it before serving.
func (a *AgentAPI) SetMaxDescriptorBytes(n int) { a.descriptors.maxBytes = n }

// SetTunnelRate bounds how fast one agent may open tunnels: perSecond on average, burst at once. Zero
// means no limit. Set it before serving.
func (a *AgentAPI) SetTunnelRate(perSecond float64, burst int) {
	a.rates = tunnelRates{perSecond: perSecond, burst: burst, byAgent: map[int64]*rate.Limiter{}}
}

// tunnelRates is one token bucket per agent id. Agent ids are authenticated first, so the map is bounded
// by the agents that exist.
type tunnelRates struct {
	perSecond float64
	burst     int
	mu        sync.Mutex
	byAgent   map[int64]*rate.Limiter
}

func (r *tunnelRates) allow(agentID int64) error {
	if r.perSecond <= 0 {
		return nil
	}
	r.mu.Lock()
	l := r.byAgent[agentID]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(r.perSecond), max(r.burst, 1))
		r.byAgent[agentID] = l
	}
	r.mu.Unlock()
	if !l.Allow() {
		return status.Errorf(codes.ResourceExhausted, "agent %d opens tunnels faster than the limit (--max-tunnel-rate) of %g/s", agentID, r.perSecond)
	}
	return nil
}

// DefaultHandshakeTimeout is how long an agent has, after opening a Connect stream, to send its
// descriptor. An agent sends it at once; a stream still silent then is refused.
const DefaultHandshakeTimeout = 5 * time.Second

// tunnelReuseHeader is kas's answer to an agent that asked for a reusable tunnel; tunnelBatchesHeader
// to one that also offered batches.
var (
	tunnelReuseHeader   = metadata.Pairs(rpc.TunnelReuseHeaderKey, "1")
	tunnelBatchesHeader = metadata.Pairs(rpc.TunnelReuseHeaderKey, "1", rpc.TunnelBatchesHeaderKey, "1")
)

// SetSingleUse makes every tunnel carry one call and end, whatever the agent asks: the protocol's first
// version, kept to measure it beside reuse. Set it before serving.
func (a *AgentAPI) SetSingleUse(on bool) { a.singleUse = on }

// SetNoBatches makes kas refuse batches on every tunnel, as kas did before they existed: mixed-version
// tests and measurements use it. Set it before serving.
func (a *AgentAPI) SetNoBatches(on bool) { a.noBatches = on }

// SetMaxSendBytes is the agent server's grpc.MaxSendMsgSize: a call whose request info would not fit
// fails before it touches a tunnel. Zero: not checked. Set it before serving.
func (a *AgentAPI) SetMaxSendBytes(n int) { a.maxSend = n }

// SetHandshakeTimeout bounds the wait for a tunnel's descriptor (DefaultHandshakeTimeout when zero).
// Set it before serving.
func (a *AgentAPI) SetHandshakeTimeout(d time.Duration) { a.handshakeTimeout = d }

// handshake reads the descriptor, the first message, within the handshake timeout. It returns io.EOF
// when the agent left first. The first message is read raw: the descriptor cache recognises it without
// decoding.
func (a *AgentAPI) handshake(stream rpc.ReverseTunnel_ConnectServer) (descriptor.Index, error) {
	timeout := cmp.Or(a.handshakeTimeout, DefaultHandshakeTimeout)
	// RecvMsg takes no deadline: it runs aside, and returning from the handler ends the stream, which
	// ends that RecvMsg too.
	type recv struct {
		first grpctool.RawFrame
		err   error
	}
	got := make(chan *recv, 1)
	go func() {
		r := &recv{}
		r.err = stream.RecvMsg(&r.first)
		got <- r
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var r *recv
	select {
	case r = <-got:
	case <-timer.C:
		return descriptor.Index{}, status.Errorf(codes.DeadlineExceeded, "no descriptor within %s of opening the tunnel (--tunnel-handshake-timeout)", timeout)
	}
	if r.err != nil {
		return descriptor.Index{}, r.err
	}
	desc, err := a.descriptors.index(r.first.Data)
	if err != nil && status.Code(err) == codes.ResourceExhausted {
		a.registry.LimitHit(tunserver.LimitDescriptorSize)
	}
	return desc, err
}

// Connect implements rpc.ReverseTunnelServer. The server must use grpctool.RawServerCodec.
func (a *AgentAPI) Connect(stream rpc.ReverseTunnel_ConnectServer) error {
	ctx := stream.Context()
	token, err := auth.BearerToken(ctx)
	if err != nil {
		a.refusals.Refused("agent", "no agent token", refusal.Peer(ctx), "err", err)
		return err
	}
	agentID, err := a.auth.AuthenticateAgent(ctx, token)
	if err != nil {
		a.refusals.Refused("agent", "invalid agent token", refusal.Peer(ctx)) // not err: an authenticator's words
		return err
	}
	if err := a.rates.allow(agentID); err != nil {
		a.registry.LimitHit(tunserver.LimitTunnelRate)
		a.refusals.Refused("agent", "tunnel rate limit", refusal.Peer(ctx), "agent_id", agentID, "err", err)
		return err
	}
	// Counted before anything is read: a stream that never sends its descriptor holds a place of the
	// agent's tunnel limit, and only for the handshake timeout.
	if err := a.registry.Reserve(agentID); err != nil {
		a.refusals.Refused("agent", "tunnel limit", refusal.Peer(ctx), "agent_id", agentID, "err", err)
		return err
	}
	desc, err := a.handshake(stream)
	if err != nil {
		a.registry.CancelReservation(agentID)
		if err == io.EOF {
			return nil // the agent left before it sent a descriptor
		}
		a.refusals.Refused("agent", "bad or missing descriptor", refusal.Peer(ctx), "agent_id", agentID, "err", err)
		return err
	}
	reuse := desc.Reuse && !a.singleUse
	batches := reuse && desc.Batches && !a.noBatches
	var tunnel rpc.ReverseTunnel_ConnectServer = stream
	switch {
	case batches:
		// Goes out with kas's first message: the agent knows before its first call ends.
		_ = stream.SetHeader(tunnelBatchesHeader)
		tunnel = &rpc.BatchedConnectServer{ReverseTunnel_ConnectServer: stream}
	case reuse:
		_ = stream.SetHeader(tunnelReuseHeader)
	}
	reason, err := a.registry.Serve(agentID, desc, tunnel, registry.TunnelOptions{MaxSend: a.maxSend, MaxConnectionAge: a.maxAge, Reuse: reuse, Batches: batches, AgentEnds: desc.EndsOnRequest})
	if reason != "" {
		stream.SetTrailer(metadata.Pairs(rpc.TunnelEndReasonKey, reason))
	}
	return err
}
