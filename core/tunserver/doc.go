// Package tunserver is the kas side of the tunnel: the agent API Connect handler, the registry that
// matches waiting calls with idle tunnels, the Router that turns gRPC methods into routed streams, the
// gateway (private API) handler and the gateway finder.
//
// It never decodes the payload of a proxied call, and never lets a "kas-hop-" metadata key or the
// caller's authorization reach an agent.
package tunserver
