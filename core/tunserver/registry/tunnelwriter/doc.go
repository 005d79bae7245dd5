// Package tunnelwriter is kas's sending half of one tunnel: every message kas writes to the agent goes
// through a Writer, one at a time and in order. A completed call's call_end, and on a batched tunnel the
// start of a call whose caller sends one request, may wait a moment (CallEndDelay) to leave with the
// tunnel's next message: on a batched tunnel as one rpc.ResponseBatch.
//
// It never reads the stream nor decides when a call or the tunnel ends (the registry does), never
// sends a held message after a later one, never batches a payload over rpc.BatchMaxBytes, and never
// sends anything once closed or after the tunnel's last message (End, an rpc.EndTunnel); Close waits for a send in progress at most a bound.
package tunnelwriter
