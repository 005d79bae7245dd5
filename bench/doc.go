// Package bench is the benchmark harness: it starts topologies of kas and agents, drives load through
// them and through a direct gRPC baseline in the same run, and reports what the tunnel costs.
//
// It uses only the tunnel core's public API, as a user would; the core never imports it.
package bench
