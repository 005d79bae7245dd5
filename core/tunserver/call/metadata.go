// Package call reads what kas needs of a routed call (method, agent id, metadata for the agent) and turns
// an agent's answer back into the caller's. It never decodes a payload, and what it passes on never
// carries a kas-only ("kas-hop-") key or the caller's credentials.
package call

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
)

// hopByHopKeys never travel past kas. Reserved gRPC and HTTP/2 headers are re-created by each hop.
var hopByHopKeys = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"connection":          true,
	"keep-alive":          true,
	"proxy-connection":    true,
	"transfer-encoding":   true,
	"upgrade":             true,
	"te":                  true,
	"content-type":        true,
	"user-agent":          true,
}

func isReserved(key string) bool {
	return strings.HasPrefix(key, ":") || strings.HasPrefix(key, "grpc-")
}

// AgentIDFromMetadata reads the routing agent id. Missing, repeated or malformed ids are InvalidArgument.
func AgentIDFromMetadata(md metadata.MD) (int64, error) {
	vals := md.Get(rpc.RoutingAgentIDMetadataKey)
	switch len(vals) {
	case 0:
		return 0, status.Errorf(codes.InvalidArgument, "missing %s metadata: set it to the decimal id of the agent to call", rpc.RoutingAgentIDMetadataKey)
	case 1:
	default:
		return 0, status.Errorf(codes.InvalidArgument, "%s metadata must be present once, got %d values", rpc.RoutingAgentIDMetadataKey, len(vals))
	}
	id, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "%s metadata %q is not a decimal int64", rpc.RoutingAgentIDMetadataKey, truncate(vals[0], 64))
	}
	return id, nil
}

// DefaultMaxMetadataBytes bounds a routed call's request metadata, counted as HTTP/2 counts a header
// list (name + value + 32 bytes per field). Proxies commonly allow 60 to 64 KiB of request headers.
const DefaultMaxMetadataBytes = 64 << 10

// MetadataSize is md's size as HTTP/2 counts a header list: name + value + 32 bytes per field.
func MetadataSize(md metadata.MD) int {
	n := 0
	for k, vals := range md {
		for _, v := range vals {
			n += len(k) + len(v) + 32
		}
	}
	return n
}

// ToGateway is the metadata the routing kas forwards to a gateway kas: the caller's metadata without
// reserved headers and without the caller's credentials (kas authenticates kas with its own).
func ToGateway(md metadata.MD) metadata.MD {
	out := make(metadata.MD, len(md))
	for k, v := range md {
		if isReserved(k) || hopByHopKeys[k] {
			continue
		}
		out[k] = v
	}
	return out
}

// AgentMeta is the wire form of the metadata that reaches the agent: no "kas-hop-" key, no
// authorization, nothing reserved.
func AgentMeta(md metadata.MD) map[string]*rpc.Values {
	var out map[string]*rpc.Values
	for k, vals := range md {
		if isReserved(k) || hopByHopKeys[k] || strings.HasPrefix(k, rpc.RoutingHopPrefix) {
			continue
		}
		if out == nil {
			out = make(map[string]*rpc.Values, len(md))
		}
		v := make([][]byte, len(vals))
		for i, s := range vals {
			v[i] = []byte(s)
		}
		out[k] = &rpc.Values{Value: v}
	}
	return out
}

// FromAgent cleans header and trailer metadata coming back from an agent before it reaches the caller.
func FromAgent(md metadata.MD) metadata.MD {
	for k := range md {
		if k != strings.ToLower(k) || isReserved(k) || hopByHopKeys[k] {
			delete(md, k)
		}
	}
	return md
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func methodError(fullMethod string, err error) error {
	return status.Error(codes.InvalidArgument, fmt.Sprintf("bad method: %v", err))
}

// Call is what routing and gateways need to know about a routed call.
type Call struct {
	AgentID         int64
	FullMethod      string
	Service, Method string
	// MD is the caller's metadata, as received.
	MD metadata.MD
	// Info is the request info for the agent: the metadata without kas-only keys and credentials.
	Info *rpc.RequestInfo
}

// Attrs are the call's span attributes.
func (c Call) Attrs() []attribute.KeyValue {
	return []attribute.KeyValue{attribute.Int64("tunnel.agent_id", c.AgentID), attribute.String("rpc.method", c.FullMethod)}
}

// Parse reads the method, the agent id and the metadata for the agent from the stream. Metadata
// over maxMetadata bytes is refused here, before routing: it is the call's own content, and it must
// fail that call, never a tunnel that it would not fit into.
func Parse(stream grpc.ServerStream, maxMetadata int, onLimit tunserver.OnLimit) (Call, error) {
	ctx := stream.Context()
	fullMethod, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return Call{}, status.Error(codes.Internal, "no method name in stream context")
	}
	service, method, err := grpctool.SplitMethod(fullMethod)
	if err != nil {
		return Call{}, methodError(fullMethod, err)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if n := MetadataSize(md); n > maxMetadata {
		onLimit.Hit(tunserver.LimitMetadataSize)
		return Call{}, status.Errorf(codes.ResourceExhausted, "request metadata is %d bytes, larger than the limit (--max-metadata-bytes) of %d bytes", n, maxMetadata)
	}
	agentID, err := AgentIDFromMetadata(md)
	if err != nil {
		return Call{}, err
	}
	info := &rpc.RequestInfo{MethodName: fullMethod, Meta: AgentMeta(md)}
	if info.Meta == nil {
		info.Meta = map[string]*rpc.Values{} // trace context may be added
	}
	if dl, ok := ctx.Deadline(); ok {
		info.Deadline = timestamppb.New(dl)
	}
	return Call{AgentID: agentID, FullMethod: fullMethod, Service: service, Method: method, MD: md, Info: info}, nil
}

// AgentStatusErr turns the agent's final status into the caller's error. An "error" that says OK is not
// one: the agent broke the protocol.
func AgentStatusErr(e *rpc.Error) error {
	st := e.GetStatus()
	if st == nil || codes.Code(st.GetCode()) == codes.OK {
		return status.Error(codes.Unknown, "agent sent an error message without an error status")
	}
	return status.ErrorProto(st)
}

// EndSpan ends span, marking an error (but not a call moving to another tunnel, which is no failure).
func EndSpan(span trace.Span, err error) {
	if err != nil && !errors.Is(err, registry.ErrRetryOtherTunnel) {
		span.SetStatus(otelcodes.Error, status.Convert(err).Message())
	}
	span.End()
}

// ForwardErr is the caller's status for how forwarding ended: ctx's own end as a status, anything else
// as it is.
func ForwardErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}
