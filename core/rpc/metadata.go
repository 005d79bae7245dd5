package rpc

import (
	"google.golang.org/grpc/metadata"
)

// MetaToValues converts gRPC metadata to its wire form. Values are copied as bytes, so "-bin" keys keep
// their binary values.
func MetaToValues(md metadata.MD) map[string]*Values {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]*Values, len(md))
	for k, vals := range md {
		v := make([][]byte, len(vals))
		for i, s := range vals {
			v[i] = []byte(s)
		}
		out[k] = &Values{Value: v}
	}
	return out
}

// ValuesToMeta converts the wire form back to gRPC metadata. Keys are lower-cased by metadata.MD rules
// when the result is used; an entry without values is dropped.
func ValuesToMeta(vals map[string]*Values) metadata.MD {
	if len(vals) == 0 {
		return nil
	}
	md := make(metadata.MD, len(vals))
	for k, v := range vals {
		if len(v.GetValue()) == 0 {
			continue
		}
		s := make([]string, len(v.GetValue()))
		for i, b := range v.GetValue() {
			s[i] = string(b)
		}
		md[k] = s
	}
	return md
}

// Metadata keys kas reads; every key with RoutingHopPrefix is for kas only and never reaches an agent.
const (
	// RoutingHopPrefix marks metadata keys that are for kas only.
	RoutingHopPrefix = "kas-hop-"
	// RoutingAgentIDMetadataKey selects the agent a call is routed to: a decimal int64, present once.
	RoutingAgentIDMetadataKey = RoutingHopPrefix + "routing-agent-id"
	// GatewayRetryTrailerKey is set by a gateway kas whose tunnel went away before the agent accepted
	// the call: nothing happened, and the routing kas may send the call elsewhere.
	GatewayRetryTrailerKey = RoutingHopPrefix + "gateway-retry"
	// GatewayEagerKey, in a gateway kas's response header, says that it serves eager streams; in a
	// routing kas's request, it asks for one: the gateway starts the call at once on an idle tunnel,
	// without start_streaming, or answers no_tunnel and ends the stream without reading a frame. A
	// routing kas asks only a gateway that announced it, so kas of different versions work together.
	GatewayEagerKey = RoutingHopPrefix + "gateway-eager"
	// GatewayEagerV2, as GatewayEagerKey's value in a routing kas's request (a gateway that knows only the
	// first version takes any value for an eager stream), offers the second version of eager streams: a
	// late tunnel_ready and batches (see gateway.proto). Late tunnel_ready: for a call whose whole request
	// (one message and the half-close) the gateway reads at once, because the agent's tunnel says the
	// method takes one request, tunnel_ready goes with the answer's first message instead of when the
	// gateway takes the call; the routing kas has then sent everything and has nothing to wait for. A
	// gateway status with GatewayRetryTrailerKey before tunnel_ready then means that the call did not
	// start and may be replayed. Batches: what the agent sent as one batch goes on as one GatewayBatch.
	// Together, one write and one wake-up of each kas, and three gRPC messages, fewer per small call. A
	// value rather than a key of its own: no more header bytes to send and parse per call.
	GatewayEagerV2 = "2"
	// GatewayUnservedTrailerKey is set by a gateway kas whose Unimplemented status says that the
	// agent's tunnels there do not serve the method (rather than any other Unimplemented on the way).
	GatewayUnservedTrailerKey = RoutingHopPrefix + "gateway-unserved"
	// GatewayReuseKey, in a gateway kas's response header, says that it serves hop streams
	// (KasHopMethod): a routing kas's eager calls to it may ride one after another on a stream kept open.
	// A routing kas opens one only to a gateway that said so, so kas of different versions work together.
	GatewayReuseKey = RoutingHopPrefix + "gateway-reuse"
)

// KasHopMethod is the private API method of hop streams (see gateway.proto). A gateway kas serves it
// instead of routing it to an agent.
const KasHopMethod = "/tunnelbench.rpc.v1.KasHop/Calls"

// TunnelReuseHeaderKey is the Connect response header with which kas accepts an agent's request for a
// reusable tunnel (Descriptor.reuse). An agent that does not see it treats the tunnel as single-use.
const TunnelReuseHeaderKey = "tunnel-reuse"

// TunnelBatchesHeaderKey is the Connect response header with which kas accepts an agent's offer of
// batches (Descriptor.batches) on a reusable tunnel: from then on both may send RequestBatch and
// ResponseBatch. An agent that does not see it sends and expects no batch.
const TunnelBatchesHeaderKey = "tunnel-batches"

// TunnelEndReasonKey is the trailer key with which kas tells an agent why it ended an idle tunnel.
const TunnelEndReasonKey = "tunnel-end-reason"

// Reasons for ending an idle tunnel, sent in the TunnelEndReasonKey trailer.
const (
	// EndReasonMaxAge: the connection reached its max age; reconnect at once (on a new connection).
	EndReasonMaxAge = "max-connection-age"
	// EndReasonShutdown: kas is shutting down; reconnect after a random delay, to another kas.
	EndReasonShutdown = "shutdown"
	// EndReasonCallEnded: kas ended the tunnel because of its call (the caller went away, or the call
	// could not be passed on), whatever status it carries; nothing is wrong with the agent's
	// connection: reconnect at once.
	EndReasonCallEnded = "call-ended"
)

// HTTPInlineBodyMetadataKey is the request metadata of an HTTP exchange with which kas tells the agent
// that it reads a small body whole inside the response header (httptunnel's HTTPResponse.Header.body).
// Agents that do not know it send the body in chunks, as before.
const HTTPInlineBodyMetadataKey = "tunnel-http-inline-body"
