// Package tunnelwriter is kas's sending half of one tunnel: every message kas writes to the agent goes
// through a Writer, one at a time and in order, and a completed call's call_end may wait a moment
// (CallEndDelay) to share a write with the next call's request_info.
//
// It never reads the stream nor decides when a call or the tunnel ends (the registry does), never
// sends a held call_end after another message, and never sends anything once closed; Close waits for
// a send in progress at most a bound.
package tunnelwriter
