// Package testhooks holds seams that tests use to make a race happen on purpose, for example a tunnel
// that dies exactly between tunnel_ready and start_streaming. Production code only reads them; they are
// nil outside tests.
//
// It is internal: nothing outside the module can set them.
package testhooks

import "sync/atomic"

// GatewayTunnelReady is called by a gateway kas after it sent tunnel_ready and before it reads
// start_streaming, with the agent id and a function that kills the found tunnel.
var GatewayTunnelReady atomic.Pointer[func(agentID int64, kill func())]
