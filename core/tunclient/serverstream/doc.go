// Package serverstream is the grpc.ServerStream of a call that the agent serves straight from its
// tunnel: the handler reads the request messages the tunnel delivers and writes header, messages,
// trailer and status onto the tunnel as the tunnel protocol frames them, with what a grpc.Server would
// give it (metadata, peer, method, message size limits, status codes).
//
// It never reads the tunnel nor decides when the call ends on it: the caller (tunclient) reads kas's
// side, delivers the messages and sends the end of the call; a Stream only sends this call's answer.
package serverstream
