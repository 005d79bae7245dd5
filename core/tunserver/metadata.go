package tunserver

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

const (
	// RoutingHopPrefix marks metadata keys that are for kas only. They never reach an agent.
	RoutingHopPrefix = "kas-hop-"
	// RoutingAgentIDMetadataKey selects the agent a call is routed to: a decimal int64, present once.
	RoutingAgentIDMetadataKey = RoutingHopPrefix + "routing-agent-id"
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
	vals := md.Get(RoutingAgentIDMetadataKey)
	switch len(vals) {
	case 0:
		return 0, status.Errorf(codes.InvalidArgument, "missing %s metadata: set it to the decimal id of the agent to call", RoutingAgentIDMetadataKey)
	case 1:
	default:
		return 0, status.Errorf(codes.InvalidArgument, "%s metadata must be present once, got %d values", RoutingAgentIDMetadataKey, len(vals))
	}
	id, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "%s metadata %q is not a decimal int64", RoutingAgentIDMetadataKey, truncate(vals[0], 64))
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

// toGateway is the metadata the routing kas forwards to a gateway kas: the caller's metadata without
// reserved headers and without the caller's credentials (kas authenticates kas with its own).
func toGateway(md metadata.MD) metadata.MD {
	out := make(metadata.MD, len(md))
	for k, v := range md {
		if isReserved(k) || hopByHopKeys[k] {
			continue
		}
		out[k] = v
	}
	return out
}

// agentMeta is the wire form of the metadata that reaches the agent: no "kas-hop-" key, no
// authorization, nothing reserved.
func agentMeta(md metadata.MD) map[string]*rpc.Values {
	var out map[string]*rpc.Values
	for k, vals := range md {
		if isReserved(k) || hopByHopKeys[k] || strings.HasPrefix(k, RoutingHopPrefix) {
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

// fromAgent cleans header and trailer metadata coming back from an agent before it reaches the caller.
func fromAgent(md metadata.MD) metadata.MD {
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
