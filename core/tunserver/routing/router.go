// Package routing is the routing kas: the Router that takes every call for an agent, the per-call finder
// that looks for its gateway (this kas first, then every kas the tracker lists, staggered and in
// parallel), the tracker poller and the pool of private API connections to other kas. It never decodes
// a payload and never waits without a bound: a find ends at the find timeout.
package routing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tracing"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
	"github.com/tunnelbench/tunnelbench/core/tunserver/routing/repeats"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultFindTimeout is how long a call may wait for a tunnel before it fails with DeadlineExceeded.
const DefaultFindTimeout = 20 * time.Second

// RouterConfig configures a Router.
type RouterConfig struct {
	// Finder finds the gateway for a call. Required.
	Finder GatewayFinder
	// FindTimeout bounds the wait for a tunnel. Zero means DefaultFindTimeout.
	FindTimeout time.Duration
	// MaxMetadataBytes bounds a call's request metadata (see call.MetadataSize). Zero means
	// call.DefaultMaxMetadataBytes.
	MaxMetadataBytes int
	// MaxWaitingPerCaller bounds the calls of one caller (see auth.WithCaller; callers without one count
	// as one) that wait for a tunnel at once. Zero means no limit.
	MaxWaitingPerCaller int
	// OnLimit is told of every call refused for a limit.
	OnLimit tunserver.OnLimit
	// Presence is this kas's registry.Presence. With it, a call that repeats a call from the same
	// client connection that just failed for want of a tunnel gets the same answer at once (see
	// repeats.Window); nil: every call waits.
	Presence func(agentID int64, service, method string) presence.Presence
	// Meter records the routing metrics. Nil records nothing.
	Meter metric.Meter
	// Tracer records routing spans (route, find gateway, forward). Nil records nothing; trace context
	// from callers still reaches agents.
	Tracer trace.Tracer
	Log    *slog.Logger
}

// Router routes calls for agents: for each call it finds a gateway (a tunnel of this kas, or another
// kas that holds one) and proxies the call through it. Every method of every service is routable, unary
// or streaming, as a bidirectional stream; payloads are never decoded.
type Router struct {
	cfg     RouterConfig
	metrics *routingMetrics
	waits   *callerWaits
	repeats *repeats.Memory
	log     *slog.Logger
}

// NewRouter validates cfg and returns a Router.
func NewRouter(cfg RouterConfig) (*Router, error) {
	var errs []error
	if cfg.Finder == nil {
		errs = append(errs, errors.New("gateway finder is required"))
	}
	if cfg.FindTimeout < 0 {
		errs = append(errs, fmt.Errorf("find timeout must not be negative, got %s", cfg.FindTimeout))
	}
	if cfg.MaxMetadataBytes < 0 || cfg.MaxWaitingPerCaller < 0 {
		errs = append(errs, errors.New("metadata and waiting-call limits must not be negative"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("router config: %w", errors.Join(errs...))
	}
	cfg.FindTimeout = cmp.Or(cfg.FindTimeout, DefaultFindTimeout)
	cfg.MaxMetadataBytes = cmp.Or(cfg.MaxMetadataBytes, call.DefaultMaxMetadataBytes)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	m, err := newRoutingMetrics(cfg.Meter)
	if err != nil {
		return nil, err
	}
	return &Router{cfg: cfg, metrics: m, waits: newCallerWaits(cfg.MaxWaitingPerCaller, cfg.OnLimit), repeats: repeats.New(cfg.Presence), log: cfg.Log}, nil
}

// RouteStream routes one call: it is a grpc.StreamHandler, to be used as a server's unknown service
// handler so that any method is routed.
func (r *Router) RouteStream(_ any, stream grpc.ServerStream) (err error) {
	c, err := call.Parse(stream, r.cfg.MaxMetadataBytes, r.cfg.OnLimit)
	if err != nil {
		return err
	}
	ctx, span := stream.Context(), tracing.NoSpan
	if !tracing.Off(r.cfg.Tracer) {
		ctx, span = r.cfg.Tracer.Start(tracing.Propagator.Extract(ctx, tracing.MDCarrier(c.MD)), "kas.route",
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(c.Attrs()...))
	}
	defer func() { call.EndSpan(span, err) }()
	start := time.Now()
	if err := r.repeats.Lookup(stream.Context(), c); err != nil {
		r.metrics.aborted(start, false)
		r.log.Debug("call repeats one that just failed, answered at once", "agent_id", c.AgentID, "method", c.FullMethod, "err", err)
		return err
	}
	pump := request.Start(stream, c.Info, request.DefaultReplayLimit)
	w := &callerWriter{caller: stream}
	// retry: the call was withdrawn from a tunnel and is routed again; noEager: the remembered gateway
	// had no tunnel, which is no retry (the call is found for the first time).
	retry, noEager := false, false
	for {
		gw, err := r.find(ctx, stream, c, noEager)
		if err != nil {
			return r.findFailed(ctx, stream.Context(), c, start, retry, err)
		}
		if eg, ok := gw.(*eagerGateway); ok {
			// Found only once the gateway takes the call.
			eg.ready = func() {
				r.metrics.eagerResult(true)
				if !retry {
					r.metrics.found(start)
				}
			}
		} else if !retry {
			r.metrics.found(start)
		}
		wctx, wspan := tracing.StartChild(ctx, r.cfg.Tracer, "kas.forward")
		if gw.URL() == "" && !tracing.Off(r.cfg.Tracer) {
			// The agent's service continues the trace under this forward.
			tracing.Propagator.Inject(wctx, tracing.ValuesCarrier(c.Info.Meta))
		}
		err = gw.Forward(wctx, pump, w)
		call.EndSpan(wspan, err)
		gw.Release()
		if errors.Is(err, errEagerMissed) {
			// The remembered gateway had no idle tunnel and read nothing: search, as if for the first time.
			noEager = true
			r.metrics.eagerResult(false)
			r.log.Debug("eager gateway had no tunnel, searching", "agent_id", c.AgentID, "gateway", gw.URL())
			continue
		}
		if errors.Is(err, registry.ErrRetryOtherTunnel) {
			// The tunnel went away before the agent took the call: nothing happened, try again.
			r.log.Debug("tunnel withdrawn as the call arrived, routing again", "agent_id", c.AgentID, "method", c.FullMethod, "gateway", gw.URL())
			retry = true
			continue
		}
		if err != nil {
			return call.ForwardErr(ctx, err)
		}
		return w.final
	}
}

// find finds the call's gateway, counted against its caller's waiting calls while it looks.
func (r *Router) find(ctx context.Context, stream grpc.ServerStream, c call.Call, noEager bool) (Gateway, error) {
	fctx, fspan := tracing.StartChild(ctx, r.cfg.Tracer, "kas.find_gateway")
	req := FindRequest{AgentID: c.AgentID, FullMethod: c.FullMethod, Service: c.Service, Method: c.Method, Metadata: c.MD, FindTimeout: r.cfg.FindTimeout, NoEager: noEager}
	// The gateway continues the trace under this find (a copy: c.MD stays the caller's).
	if trace.SpanContextFromContext(fctx).IsValid() {
		req.Metadata = c.MD.Copy()
		tracing.Propagator.Inject(fctx, tracing.MDCarrier(req.Metadata))
	}
	waiter, err := r.waits.admit(stream.Context())
	if err != nil {
		call.EndSpan(fspan, err)
		return nil, err
	}
	gw, err := r.cfg.Finder.FindGateway(fctx, req)
	r.waits.release(waiter)
	if gw != nil && gw.URL() != "" {
		fspan.SetAttributes(attribute.String("tunnel.gateway", gw.URL()))
	}
	call.EndSpan(fspan, err)
	return gw, err
}

// findFailed records a failed find and returns the caller's status.
func (r *Router) findFailed(ctx, streamCtx context.Context, c call.Call, start time.Time, retry bool, err error) error {
	var te *findTimeoutError
	timedOut := errors.As(err, &te)
	if !retry {
		r.metrics.aborted(start, timedOut)
	}
	switch {
	case timedOut && retry:
		return status.Errorf(codes.DeadlineExceeded,
			"the tunnel to agent %d went away as the call arrived, and no other tunnel for %s came within %s",
			c.AgentID, c.FullMethod, r.cfg.FindTimeout)
	case timedOut:
		r.log.Debug("no tunnel found in time", "agent_id", c.AgentID, "method", c.FullMethod, "timeout", r.cfg.FindTimeout)
		err = status.Errorf(codes.DeadlineExceeded,
			"no tunnel to agent %d for %s within %s: the agent is not connected, or its tunnels that serve the method stayed busy",
			c.AgentID, c.FullMethod, r.cfg.FindTimeout)
		r.repeats.Remember(streamCtx, c, err)
		return err
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case status.Code(err) == codes.Unimplemented:
		r.log.Debug("agent does not serve the method", "agent_id", c.AgentID, "method", c.FullMethod, "err", err)
		r.repeats.Remember(streamCtx, c, err)
		return err
	default:
		return err
	}
}
