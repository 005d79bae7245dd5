// Package grpctool holds small gRPC helpers shared by kas and agentk: the raw-bytes codec that lets kas
// proxy calls without decoding them, an in-memory listener, method name parsing and stream descriptors.
//
// It must never import the tunnel packages; they import it.
package grpctool
