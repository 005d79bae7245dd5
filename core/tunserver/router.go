package tunserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tracing"
)

// DefaultFindTimeout is how long a call may wait for a tunnel before it fails with DeadlineExceeded.
const DefaultFindTimeout = 20 * time.Second

// RouterConfig configures a Router.
type RouterConfig struct {
	// Registry holds this kas's tunnels. Required.
	Registry *Registry
	// Finder finds the gateway kas for a call. Required.
	Finder GatewayFinder
	// InternalServer is where routing handlers are registered for in-process callers. Optional.
	InternalServer grpc.ServiceRegistrar
	// PrivateServer is where gateway handlers are registered for routing kas instances. Required.
	PrivateServer grpc.ServiceRegistrar
	// FindTimeout bounds the wait for a tunnel. Zero means DefaultFindTimeout.
	FindTimeout time.Duration
	// MaxMetadataBytes bounds a call's request metadata (see MetadataSize). Zero means
	// DefaultMaxMetadataBytes.
	MaxMetadataBytes int
	// MaxWaitingPerCaller bounds the calls of one caller (see WithCaller; callers without one count as
	// one) that wait for a tunnel at once. Zero means no limit.
	MaxWaitingPerCaller int
	// Meter records the routing metrics. Nil records nothing.
	Meter metric.Meter
	// Tracer records routing spans (route, find gateway, forward). Nil records nothing; trace context
	// from callers still reaches agents.
	Tracer trace.Tracer
	Log    *slog.Logger
}

// Router turns gRPC methods of agent services into routed streams: on the routing side a handler finds a
// gateway and proxies the call to it; on the gateway side a handler finds a tunnel and proxies the call
// into it. Payloads are never decoded.
type Router struct {
	cfg     RouterConfig
	metrics *routingMetrics
	gateway *gatewayHandler
	waits   *callerWaits
	log     *slog.Logger
}

// NewRouter validates cfg and returns a Router.
func NewRouter(cfg RouterConfig) (*Router, error) {
	var errs []error
	if cfg.Registry == nil {
		errs = append(errs, errors.New("registry is required"))
	}
	if cfg.Finder == nil {
		errs = append(errs, errors.New("gateway finder is required"))
	}
	if cfg.PrivateServer == nil {
		errs = append(errs, errors.New("private API server is required"))
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
	if cfg.FindTimeout == 0 {
		cfg.FindTimeout = DefaultFindTimeout
	}
	if cfg.MaxMetadataBytes == 0 {
		cfg.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
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
	return &Router{
		cfg:     cfg,
		metrics: m,
		gateway: &gatewayHandler{registry: cfg.Registry, replayLimit: DefaultReplayLimit, maxMetadata: cfg.MaxMetadataBytes, log: cfg.Log, tracer: cfg.Tracer},
		waits:   newCallerWaits(cfg.MaxWaitingPerCaller, cfg.Registry),
		log:     cfg.Log,
	}, nil
}

// RegisterTunclientAPI makes every method of desc, unary or streaming, a bidirectional stream handler:
// the routing copy on the internal server, the gateway copy on the private API server.
func (r *Router) RegisterTunclientAPI(desc *grpc.ServiceDesc) {
	if r.cfg.InternalServer != nil {
		r.cfg.InternalServer.RegisterService(bidiServiceDesc(desc, r.RouteStream), nil)
	}
	r.cfg.PrivateServer.RegisterService(bidiServiceDesc(desc, r.gateway.handle), nil)
}

// GatewayStreamHandler serves every method on the private API: use it as that server's unknown service
// handler so that calls for services kas was never told about reach their agents too.
func (r *Router) GatewayStreamHandler() grpc.StreamHandler {
	return r.gateway.handle
}

func bidiServiceDesc(desc *grpc.ServiceDesc, h grpc.StreamHandler) *grpc.ServiceDesc {
	out := &grpc.ServiceDesc{
		ServiceName: desc.ServiceName,
		HandlerType: (*any)(nil),
		Metadata:    desc.Metadata,
	}
	for _, name := range grpctool.ServiceMethods(desc) {
		out.Streams = append(out.Streams, grpc.StreamDesc{
			StreamName:    name,
			Handler:       h,
			ServerStreams: true,
			ClientStreams: true,
		})
	}
	return out
}

// RouteStream routes one call: it is a grpc.StreamHandler, usable as a server's unknown service handler
// to route any method.
func (r *Router) RouteStream(_ any, stream grpc.ServerStream) (err error) {
	c, err := parseCall(stream, r.cfg.MaxMetadataBytes, r.cfg.Registry)
	if err != nil {
		return err
	}
	ctx, span := r.cfg.Tracer.Start(tracing.Propagator.Extract(stream.Context(), tracing.MDCarrier(c.md)), "kas.route",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(callAttrs(c)...))
	defer func() { endSpan(span, err) }()
	start := time.Now()
	// Read the request while the gateway is being found: the request info and the first messages then
	// leave together.
	pump := startRequestPump(stream, c.info, r.gateway.replayLimit)
	w := &callerWriter{caller: stream}
	req := FindRequest{
		AgentID:     c.agentID,
		FullMethod:  c.fullMethod,
		Service:     c.service,
		Method:      c.method,
		Metadata:    c.md,
		FindTimeout: r.cfg.FindTimeout,
	}
	for retry := false; ; retry = true {
		fctx, fspan := r.cfg.Tracer.Start(ctx, "kas.find_gateway")
		// The gateway continues the trace under this find (a copy: c.md stays the caller's).
		req.Metadata = c.md
		if trace.SpanContextFromContext(fctx).IsValid() {
			req.Metadata = c.md.Copy()
			tracing.Propagator.Inject(fctx, tracing.MDCarrier(req.Metadata))
		}
		waiter, err := r.waits.admit(stream.Context())
		if err != nil {
			endSpan(fspan, err)
			return err
		}
		gw, err := r.cfg.Finder.FindGateway(fctx, req)
		r.waits.release(waiter)
		if gw.URL != "" {
			fspan.SetAttributes(attribute.String("tunnel.gateway", gw.URL))
		}
		endSpan(fspan, err)
		if err != nil {
			return r.findFailed(ctx, c, start, retry, err)
		}
		if !retry {
			r.metrics.found(start)
		}
		wctx, wspan := r.cfg.Tracer.Start(ctx, "kas.forward")
		if gw.stream != nil {
			err = forwardRemote(wctx, w, gw.stream, pump)
		} else {
			// The agent's service continues the trace under this forward.
			tracing.Propagator.Inject(wctx, tracing.ValuesCarrier(c.info.Meta))
			err = gw.tunnel.forward(wctx, r.cfg.Registry, pump, w.agentMessage)
		}
		endSpan(wspan, err)
		gw.Release()
		if errors.Is(err, errRetryOtherTunnel) {
			// The tunnel went away before the agent took the call: nothing happened, try again.
			r.log.Debug("tunnel withdrawn as the call arrived, routing again", "agent_id", c.agentID, "method", c.fullMethod, "gateway", gw.URL)
			continue
		}
		if err != nil {
			return forwardErr(ctx, err)
		}
		return w.final
	}
}

func callAttrs(c call) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.Int64("tunnel.agent_id", c.agentID), attribute.String("rpc.method", c.fullMethod)}
}

// endSpan ends span, marking an error.
func endSpan(span trace.Span, err error) {
	if err != nil && !errors.Is(err, errRetryOtherTunnel) {
		span.SetStatus(otelcodes.Error, status.Convert(err).Message())
	}
	span.End()
}

// findFailed records a failed find and returns the caller's status.
func (r *Router) findFailed(ctx context.Context, c call, start time.Time, retry bool, err error) error {
	var te *findTimeoutError
	timedOut := errors.As(err, &te)
	if !retry {
		r.metrics.aborted(start, timedOut)
	}
	switch {
	case timedOut && retry:
		return status.Errorf(codes.DeadlineExceeded,
			"the tunnel to agent %d went away as the call arrived, and no other tunnel for %s came within %s",
			c.agentID, c.fullMethod, r.cfg.FindTimeout)
	case timedOut:
		r.log.Debug("no tunnel found in time", "agent_id", c.agentID, "method", c.fullMethod, "timeout", r.cfg.FindTimeout)
		return status.Errorf(codes.DeadlineExceeded,
			"no tunnel to agent %d for %s within %s: the agent is not connected, or does not serve this method",
			c.agentID, c.fullMethod, r.cfg.FindTimeout)
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	default:
		return err
	}
}

// callerWriter writes the agent's answer to the caller.
type callerWriter struct {
	caller grpc.ServerStream
	final  error
}

// agentMessage writes one message of the agent's answer (the sink of a local tunnel).
func (w *callerWriter) agentMessage(m *rpc.ConnectRequest) error {
	switch x := m.GetMsg().(type) {
	case *rpc.ConnectRequest_Header:
		return w.header(x.Header)
	case *rpc.ConnectRequest_Message:
		return w.message(x.Message)
	case *rpc.ConnectRequest_Trailer:
		w.trailer(x.Trailer)
	case *rpc.ConnectRequest_Error:
		w.final = agentStatusErr(x.Error)
	}
	return nil
}

// header sends a non-empty header at once; an empty one goes with the first message, or the answer is
// trailers-only, exactly as the service's own would be.
func (w *callerWriter) header(h *rpc.Header) error {
	if md := fromAgent(rpc.ValuesToMeta(h.GetMeta())); len(md) > 0 {
		err := w.caller.SendHeader(md)
		if err != nil && w.caller.Context().Err() == nil {
			// The caller is still there: gRPC refused the header itself.
			return status.Errorf(codes.Internal, "the agent's response header is not valid gRPC metadata: %s", status.Convert(err).Message())
		}
		return err
	}
	return nil
}

func (w *callerWriter) message(m *rpc.Message) error {
	return w.caller.SendMsg(&grpctool.RawFrame{Data: m.GetData()})
}

func (w *callerWriter) trailer(t *rpc.Trailer) {
	w.caller.SetTrailer(fromAgent(rpc.ValuesToMeta(t.GetMeta())))
}

// retryTrailerKey is set by a gateway kas whose tunnel went away before the agent accepted the call:
// nothing happened, and the routing kas may send the call elsewhere.
const retryTrailerKey = RoutingHopPrefix + "gateway-retry"

// forwardRemote carries the call through a gateway kas that has a tunnel ready: the request through the
// pump, the gateway's messages to the caller. It returns errRetryOtherTunnel when the gateway lost its
// tunnel before the agent accepted the call and the request can be replayed.
func forwardRemote(ctx context.Context, w *callerWriter, gw grpc.ClientStream, pump *requestPump) error {
	// A failed attach means the stream is over: its status comes from RecvMsg.
	_ = pump.attach(&gatewayTarget{cs: gw})
	defer pump.detach()
	checker := rpc.NewChecker(rpc.GatewayToRouting)
	_ = checker.Next(rpc.StateTunnelReady)
	accepted := false
	for {
		var m rpc.GatewayResponse
		err := gw.RecvMsg(&m)
		if err == io.EOF {
			if err := checker.Next(rpc.StateEOF); err != nil {
				return status.Errorf(codes.Unavailable, "gateway kas ended the call without an answer: %v", status.Convert(err).Message())
			}
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			if !accepted && len(gw.Trailer().Get(retryTrailerKey)) > 0 {
				if pump.detach() {
					return errRetryOtherTunnel
				}
				return status.Error(codes.Unavailable, "the agent's tunnel went away as the call arrived and the request was too large to replay")
			}
			return err // the gateway's status, or the transport's
		}
		st := rpc.GatewayState(&m)
		if err := checker.Next(st); err != nil {
			return status.Errorf(codes.Unavailable, "gateway kas broke the protocol: %v", status.Convert(err).Message())
		}
		if !accepted {
			accepted = true
			pump.accept()
		}
		switch x := m.GetMsg().(type) {
		case *rpc.GatewayResponse_Header:
			if err := w.header(x.Header); err != nil {
				return err
			}
		case *rpc.GatewayResponse_Message:
			if err := w.message(x.Message); err != nil {
				return err
			}
		case *rpc.GatewayResponse_Trailer:
			w.trailer(x.Trailer)
		case *rpc.GatewayResponse_Error:
			w.final = agentStatusErr(x.Error)
		}
	}
}

// agentStatusErr turns the agent's final status into the caller's error. An "error" that says OK is not
// one: the agent broke the protocol.
func agentStatusErr(e *rpc.Error) error {
	st := e.GetStatus()
	if st == nil || codes.Code(st.GetCode()) == codes.OK {
		return status.Error(codes.Unknown, "agent sent an error message without an error status")
	}
	return status.ErrorProto(st)
}
