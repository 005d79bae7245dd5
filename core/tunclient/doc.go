// Package tunclient is the agent (agentk) side of the tunnel: an in-memory gRPC server on which services
// register, a pool of tunnels to kas, and the proxying of each call that kas sends through a tunnel.
// A tunnel carries call after call when kas accepts reuse (each call closed by call_end both ways), or
// one call when kas does not or Config.SingleUse says so.
//
// The in-memory server has no transport of its own: a call of a registered service is served with the
// tunnel itself as the handler's grpc.ServerStream (grpctool.ServiceMux dispatches it), which saves two
// HTTP/2 transports and several goroutine hand-offs per call over a grpc.Server behind bufconn. That
// server is still available (Config.BufconnServer) and passes the same tests. Exposed upstreams are
// real gRPC servers and get the call replayed on a client connection.
//
// Two parts are packages of their own: serverstream, the grpc.ServerStream a registered service gets
// for a call served from the tunnel; reconnect, the backoff between reconnects and the rate-limited log
// of why tunnels cannot connect. This package keeps what decides when a call starts and ends on a
// tunnel, and the pool.
//
// It never abandons a call it has started: stopping the agent lets calls in flight finish.
package tunclient
