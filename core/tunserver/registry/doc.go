// Package registry holds this kas's tunnels and the calls waiting for them, matched per agent first in,
// first out, in independently locked stripes. It owns each tunnel's life (idle, found, forwarding, done;
// tunnel.go) and carries one call at a time over a tunnel (forward.go), its one reader passing the
// agent's messages straight to the caller. Its parts: descriptor (what a tunnel serves), presence
// (whether an agent serves a method here, and the unserved watch), tunnelwriter (kas's sends on a
// tunnel); a call's request reaches the tunnel through a request.Pump.
//
// It never waits for I/O under a stripe lock, never moves a tunnel outside its declared transitions,
// and never sends on a tunnel whose Connect handler has ended.
package registry
