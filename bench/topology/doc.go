// Package topology builds the harness's topologies as a Go API: it configures and starts kas instances
// and agents serving the demo service, connected by pluggable links (TCP, in memory, or a caller's
// wrapper); tests, bench and chaos all start kas and agents here. It never imports chaos, cmd or tests.
//
// Child processes and Redis are in the leaf package proc, which imports nothing of the tunnel core.
package topology
