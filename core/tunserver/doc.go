// Package tunserver is the kas side of the tunnel. Its parts, each a package of its own:
//
//   - agentapi: the Connect handler agents open tunnels on (authentication, handshake, descriptor).
//   - registry: the tunnels this kas holds and the calls waiting for them, matched first in, first
//     out; a tunnel's life (idle, found, forwarding, done) and the forwarding of one call over it. Its
//     parts: registry/descriptor, registry/presence, registry/tunnelwriter.
//   - request: a routed call's request on its way to a tunnel or gateway, kept to replay until the
//     agent accepts the call.
//   - routing: the Router that turns every gRPC method into a routed stream, the per-call finder that
//     asks this kas and then the kas replicas the tracker lists, the tracker poller and the pool of
//     connections to other kas; routing/repeats answers a call that just failed for want of a tunnel
//     again at once.
//   - gateway: the private API handler through which another kas uses this kas's tunnels.
//   - call: what kas reads from a routed call (method, agent id, metadata for the agent) and writes back.
//   - auth: agent tokens, caller tokens, and the short-lived tokens kas replicas sign for each other.
//   - refusal: the rate-limited log of the agents and callers kas turns away.
//
// Vocabulary, used with one meaning throughout: a tunnel is one Connect stream from an agent; the
// routing kas received the call; a gateway is the kas that holds the tunnel a call goes through (this
// kas itself, or another replica reached over its private API); a gateway stream is one call's stream
// on the private API; the finder looks for the gateway of one call.
//
// kas never decodes the payload of a routed call, and never lets a "kas-hop-" metadata key or the
// caller's authorization reach an agent. This package holds only the limit names the parts share.
package tunserver
