// Package reconnect decides how long an agent's tunnel waits before it reconnects to kas after a
// failure (Backoff, with jitter), and tells the person running the agent, rate-limited, why its tunnels
// cannot connect and when they are back (Log).
//
// It never waits, dials or retries itself: the tunnel pool does, with the durations it gets here. It
// never logs anything of the agent's credentials: only kas's statuses and gRPC's transport errors.
package reconnect
