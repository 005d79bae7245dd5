package tunserver

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tracing"
	"github.com/tunnelbench/tunnelbench/internal/testhooks"
)

// gatewayHandler serves the private API: a routing kas (possibly this one, in memory) asks for a tunnel
// to an agent and, once it picked this gateway, streams the call through it.
type gatewayHandler struct {
	registry    *Registry
	replayLimit int
	maxMetadata int
	log         *slog.Logger
	tracer      trace.Tracer
}

func (g *gatewayHandler) handle(_ any, stream grpc.ServerStream) (err error) {
	c, err := parseCall(stream, g.maxMetadata, g.registry)
	if err != nil {
		return err
	}
	ctx, span := g.tracer.Start(tracing.Propagator.Extract(stream.Context(), tracing.MDCarrier(c.md)), "kas.gateway",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(callAttrs(c)...))
	defer func() { endSpan(span, err) }()
	found, h := g.registry.FindTunnel(c.agentID, c.service, c.method)
	defer h.Done()
	if !found {
		if err := stream.SendMsg(gatewayNoTunnel); err != nil {
			return err
		}
	}
	_, fspan := g.tracer.Start(ctx, "kas.find_tunnel")
	tun, err := h.Get(ctx)
	endSpan(fspan, err)
	if err != nil {
		return gatewayFindErr(ctx, err)
	}
	if err := stream.SendMsg(gatewayTunnelReady); err != nil {
		return err
	}
	if hook := testhooks.GatewayTunnelReady.Load(); hook != nil {
		(*hook)(c.agentID, func() { g.registry.onReaderResult(tun, recvResult{err: io.ErrUnexpectedEOF}) })
	}
	if err := recvStartStreaming(stream); err != nil {
		// The routing kas picked another gateway, gave up, or broke the protocol: Done gives the tunnel back.
		return err
	}
	sink := func(m *rpc.ConnectRequest) error { return stream.SendMsg(gatewayFromAgent(m)) }
	wctx, wspan := g.tracer.Start(ctx, "kas.forward")
	tracing.Propagator.Inject(wctx, tracing.ValuesCarrier(c.info.Meta))
	err = tun.forward(wctx, g.registry, startRequestPump(stream, c.info, g.replayLimit), sink)
	endSpan(wspan, err)
	if errors.Is(err, errRetryOtherTunnel) {
		// The routing kas kept the request: it sends the call to another tunnel, here or elsewhere.
		stream.SetTrailer(metadata.Pairs(retryTrailerKey, "1"))
		return status.Errorf(codes.Unavailable, "the tunnel to agent %d went away before the call started", c.agentID)
	}
	return forwardErr(ctx, err)
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

// call is what routing and gateways need to know about a call.
type call struct {
	agentID         int64
	fullMethod      string
	service, method string
	md              metadata.MD
	info            *rpc.RequestInfo
}

// parseCall reads the method, the agent id and the metadata for the agent from the stream. Metadata
// over maxMetadata bytes is refused here, before routing: it is the call's own content, and it must
// fail that call, never a tunnel that it would not fit into.
func parseCall(stream grpc.ServerStream, maxMetadata int, reg *Registry) (call, error) {
	ctx := stream.Context()
	fullMethod, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return call{}, status.Error(codes.Internal, "no method name in stream context")
	}
	service, method, err := grpctool.SplitMethod(fullMethod)
	if err != nil {
		return call{}, methodError(fullMethod, err)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if n := MetadataSize(md); n > maxMetadata {
		reg.limitHit(LimitMetadataSize)
		return call{}, status.Errorf(codes.ResourceExhausted, "request metadata is %d bytes, larger than the limit (--max-metadata-bytes) of %d bytes", n, maxMetadata)
	}
	agentID, err := AgentIDFromMetadata(md)
	if err != nil {
		return call{}, err
	}
	info := &rpc.RequestInfo{MethodName: fullMethod, Meta: agentMeta(md)}
	if info.Meta == nil {
		info.Meta = map[string]*rpc.Values{} // trace context may be added
	}
	if dl, ok := ctx.Deadline(); ok {
		info.Deadline = timestamppb.New(dl)
	}
	return call{agentID: agentID, fullMethod: fullMethod, service: service, method: method, md: md, info: info}, nil
}

func gatewayFindErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}

func forwardErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}

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
