// Package rpc holds the tunnel wire protocol: the generated code of tunnel.proto and gateway.proto, the
// state tables that every stream is checked against, and metadata conversions.
//
// It must never depend on the agent or server side: both sides import it.
package rpc
