// Package tunclient is the agent (agentk) side of the tunnel: an in-memory gRPC server on which services
// register, a pool of tunnels to kas, and the proxying of each call that kas sends through a tunnel.
//
// It never abandons a call it has started: stopping the agent lets calls in flight finish.
package tunclient
