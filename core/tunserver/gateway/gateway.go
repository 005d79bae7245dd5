// Package gateway serves kas's private API: another kas replica (the routing kas) asks this kas for a
// tunnel to an agent, waits for tunnel_ready, picks this gateway with start_streaming and streams the call
// through the tunnel. It trusts only callers that the private API's authentication let through.
package gateway

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tracing"
	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
)

// Config configures a Handler.
type Config struct {
	// Registry holds this kas's tunnels. Required.
	Registry *registry.Registry
	// MaxMetadataBytes bounds a call's request metadata; zero means call.DefaultMaxMetadataBytes.
	MaxMetadataBytes int
	// UnservedGrace: when the agent's tunnels here all lack the method for this long, the gateway
	// answers Unimplemented (see presence.GetServed). Zero means presence.DefaultUnservedGrace;
	// negative waits as long as the routing kas does.
	UnservedGrace time.Duration
	// Tracer records gateway spans; nil records none.
	Tracer trace.Tracer
	Log    *slog.Logger
	// OnTunnelReady, when set, is called after tunnel_ready is sent (or, when it goes late, would be) and
	// before start_streaming is read and the call starts, with the agent id and a function that breaks
	// the found tunnel: tests use it to make that race happen on purpose. Nil in production.
	OnTunnelReady func(agentID int64, breakTunnel func())
	// NoEager: serve as kas before eager streams did: never announce them, and read start_streaming
	// first on every stream.
	NoEager bool
	// EagerV1: serve eager streams as their first version only, as kas before the second did: tunnel_ready
	// when the call is taken and no batches, whatever the routing kas offers (rpc.GatewayEagerV2).
	EagerV1 bool
	// NoHopStreams: serve as kas before hop streams did: never announce them (rpc.GatewayReuseKey), and
	// take the hop method for a call like any other.
	NoHopStreams bool
}

// Handler serves the private API: a routing kas asks for a tunnel to an agent and, once it picked this
// gateway, streams the call through it. Every method is served: use Handle as the private server's
// unknown service handler.
type Handler struct {
	cfg Config
	// header is what every gateway stream's response header says this kas serves.
	header metadata.MD
	// draining is closed when kas shuts down: hop streams end between calls.
	draining  chan struct{}
	drainOnce sync.Once
	// serveCall serves each call of a hop stream: handleCall, or a stand-in in tests of the hop protocol.
	serveCall func(grpc.ServerStream) error
}

// New returns the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Registry == nil {
		return nil, errors.New("gateway: registry is required")
	}
	cfg.MaxMetadataBytes = cmp.Or(cfg.MaxMetadataBytes, call.DefaultMaxMetadataBytes)
	cfg.UnservedGrace = cmp.Or(cfg.UnservedGrace, presence.DefaultUnservedGrace)
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	g := &Handler{cfg: cfg, header: eagerHeader, draining: make(chan struct{})}
	if !cfg.NoHopStreams {
		g.header = hopHeader
	}
	g.serveCall = g.handleCall
	return g, nil
}

// Drain makes hop streams end as soon as their call under way ended, so that a graceful stop does not
// wait for streams that are only kept for the next call.
func (g *Handler) Drain() {
	g.drainOnce.Do(func() { close(g.draining) })
}

// Handle serves one gateway stream, or a hop stream; it is a grpc.StreamHandler.
func (g *Handler) Handle(_ any, stream grpc.ServerStream) error {
	if !g.cfg.NoHopStreams {
		if m, _ := grpc.MethodFromServerStream(stream); m == rpc.KasHopMethod {
			return g.serveHop(stream)
		}
	}
	return g.handleCall(stream)
}

// handleCall serves one call: of a gateway stream, or of a hop stream.
func (g *Handler) handleCall(stream grpc.ServerStream) (err error) {
	reg := g.cfg.Registry
	c, err := call.Parse(stream, g.cfg.MaxMetadataBytes, reg.LimitHit)
	if err != nil {
		return err
	}
	ctx, span := stream.Context(), tracing.NoSpan
	if !tracing.Off(g.cfg.Tracer) {
		ctx, span = g.cfg.Tracer.Start(tracing.Propagator.Extract(ctx, tracing.MDCarrier(c.MD)), "kas.gateway",
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(c.Attrs()...))
	}
	defer func() { call.EndSpan(span, err) }()
	// Every answer says that this kas serves eager streams: the routing kas may skip the find next time.
	eager, v2 := false, false
	if !g.cfg.NoEager {
		if err := stream.SetHeader(g.header); err != nil {
			return err
		}
		v := c.MD.Get(rpc.GatewayEagerKey)
		eager = len(v) > 0
		v2 = eager && !g.cfg.EagerV1 && v[0] == rpc.GatewayEagerV2
	}
	found, h := reg.FindTunnel(c.AgentID, c.Service, c.Method)
	defer h.Done()
	if !found {
		if err := stream.SendMsg(gatewayNoTunnel); err != nil {
			return err
		}
		if eager {
			// Nothing was read: the routing kas replays the call through its usual search.
			return nil
		}
	}
	tun, err := g.getTunnel(ctx, stream, c, found, h)
	if err != nil {
		return err
	}
	// A late ready goes with the answer's first message: the routing kas sent the whole request already.
	out := &answer{stream: stream, batches: v2, batcher: rpc.GatewayBatcher{Stream: stream}}
	if !v2 || !tun.OneRequest(c.Service, c.Method) {
		if err := out.ready(false); err != nil {
			return err
		}
	}
	if g.cfg.OnTunnelReady != nil {
		g.cfg.OnTunnelReady(c.AgentID, func() { reg.Break(tun) })
	}
	if !eager {
		if err := recvStartStreaming(stream); err != nil {
			// The routing kas picked another gateway, gave up, or broke the protocol: Done gives the tunnel back.
			return err
		}
	}
	wctx, wspan := tracing.StartChild(ctx, g.cfg.Tracer, "kas.forward")
	if !tracing.Off(g.cfg.Tracer) {
		tracing.Propagator.Inject(wctx, tracing.ValuesCarrier(c.Info.Meta))
	}
	err = tun.Forward(wctx, request.Start(stream, c.Info, request.DefaultReplayLimit), out.send)
	call.EndSpan(wspan, err)
	if errors.Is(err, registry.ErrRetryOtherTunnel) {
		// The routing kas kept the request: it sends the call to another tunnel, here or elsewhere.
		stream.SetTrailer(metadata.Pairs(rpc.GatewayRetryTrailerKey, "1"))
		return status.Errorf(codes.Unavailable, "the tunnel to agent %d went away before the call started", c.AgentID)
	}
	return call.ForwardErr(ctx, err)
}

// getTunnel waits for the tunnel the handle h will have (at once when found), giving up with Unimplemented
// once the agent's tunnels here all lack the method for the unserved grace.
func (g *Handler) getTunnel(ctx context.Context, stream grpc.ServerStream, c call.Call, found bool, h registry.Handle) (registry.Forwarder, error) {
	_, fspan := tracing.StartChild(ctx, g.cfg.Tracer, "kas.find_tunnel")
	if found {
		// No watch: its goroutine and timers would cost a found call more than the rest of the gateway.
		tun, err := h.Get(ctx) // never blocks when found
		call.EndSpan(fspan, err)
		return tun, err
	}
	watched := presence.Call{AgentID: c.AgentID, Service: c.Service, Method: c.Method}
	unserved := presence.UnservedError(c.AgentID, c.FullMethod, g.cfg.UnservedGrace)
	tun, err := presence.GetServed(ctx, h, g.cfg.Registry, watched, g.cfg.UnservedGrace, unserved)
	call.EndSpan(fspan, err)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if err == unserved {
			stream.SetTrailer(metadata.Pairs(rpc.GatewayUnservedTrailerKey, "1"))
		}
		return nil, err
	}
	return tun, nil
}

// recvStartStreaming reads the routing kas's first message, which must be start_streaming. It is read raw
// and decoded here, so that anything else is an InvalidArgument that says so rather than gRPC's Internal
// "failed to unmarshal", and a half-close in its place is one too rather than an Unknown "EOF".
func recvStartStreaming(stream grpc.ServerStream) error {
	var first grpctool.RawFrame
	if err := stream.RecvMsg(&first); err != nil {
		if err == io.EOF {
			c := rpc.NewChecker(rpc.RoutingToGateway)
			return c.Next(rpc.StateEOF)
		}
		return err
	}
	if err := proto.Unmarshal(first.Data, &rpc.StartStreaming{}); err != nil {
		return status.Errorf(codes.InvalidArgument, "%s: the first message is not start_streaming: %v", rpc.RoutingToGateway.Name(), err)
	}
	return nil
}

// answer sends the call to the routing kas: tunnel_ready once, then the agent's answer (it is the
// tunnel's sink). On a stream of the second eager version (rpc.GatewayEagerV2) what the agent sent as one
// batch goes on as one, a late tunnel_ready first. The handler calls ready before the call when
// tunnel_ready does not wait for the answer, the tunnel's reader send during the call: never both at once.
type answer struct {
	stream    grpc.ServerStream
	readySent bool
	batches   bool
	batcher   rpc.GatewayBatcher
}

// ready sends tunnel_ready, once; more: the agent's first message follows at once.
func (a *answer) ready(more bool) error {
	if a.readySent {
		return nil
	}
	a.readySent = true
	return a.queue(gatewayTunnelReady, more)
}

// send is the tunnel's sink (registry.Sink).
func (a *answer) send(m *rpc.ConnectRequest, pooled *[]byte, more bool) error {
	if err := a.ready(true); err != nil {
		return err
	}
	if pooled != nil {
		// The payload is pooled's buffer, which goes back once copied into a batch or written: a large
		// one goes alone (it is larger than a batch takes), a medium one with the rest of the answer.
		if err := a.batcher.SendPooled(&rpc.PooledMessage{Data: pooled, Pool: grpctool.PayloadPool}); err != nil {
			return err
		}
		return a.flushUnless(more)
	}
	return a.queue(gatewayFromAgent(m), more)
}

// queue sends m, or keeps it to leave in one batch with what follows (more) when the stream takes
// batches.
func (a *answer) queue(m *rpc.GatewayResponse, more bool) error {
	if err := a.batcher.Send(m); err != nil {
		return err
	}
	return a.flushUnless(more)
}

// flushUnless sends what is kept, unless more follows at once on a stream that takes batches.
func (a *answer) flushUnless(more bool) error {
	if more && a.batches {
		return nil
	}
	return a.batcher.Flush()
}

var eagerHeader = metadata.Pairs(rpc.GatewayEagerKey, "1")

var (
	gatewayNoTunnel    = &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_NoTunnel_{NoTunnel: &rpc.GatewayResponse_NoTunnel{}}}
	gatewayTunnelReady = &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_TunnelReady_{TunnelReady: &rpc.GatewayResponse_TunnelReady{}}}
)

// gatewayFromAgent wraps an agent message for the routing kas; the inner messages are the same types.
func gatewayFromAgent(m *rpc.ConnectRequest) *rpc.GatewayResponse {
	switch x := m.GetMsg().(type) {
	case *rpc.ConnectRequest_Header:
		return &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_Header{Header: x.Header}}
	case *rpc.ConnectRequest_Message:
		return &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_Message{Message: x.Message}}
	case *rpc.ConnectRequest_Trailer:
		return &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_Trailer{Trailer: x.Trailer}}
	case *rpc.ConnectRequest_Error:
		return &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_Error{Error: x.Error}}
	default:
		return &rpc.GatewayResponse{} // not reached: the state table only lets the four above through
	}
}
