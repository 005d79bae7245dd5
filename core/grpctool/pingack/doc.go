// Package pingack makes a gRPC server's HTTP/2 PING acknowledgement wait briefly for the connection's
// next write instead of leaving alone. gRPC-go clients probe the bandwidth with a PING on nearly every
// call's data; a server that answers later than at once (kas routing a call to an agent) otherwise writes
// the ACK by itself, and the caller's reader wakes twice per call. The ACK leaves with the next write or
// after Hold, whichever comes first. Bytes are never reordered or added; a held ACK is dropped only when
// the connection closes, which its peer sees anyway.
//
// It must never hold anything but a lone PING ACK, nor hold one for longer than Hold.
package pingack
