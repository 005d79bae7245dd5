package rpc

// What kas alone sends is decoded without protobuf's reflection (grpctool.FastDecoder): kas's messages
// to agents, and what kas replicas send each other over the private API. ConnectRequest, which agents
// send, is decoded by protobuf.

// SentByKasOnly marks ConnectResponse as a grpctool.FastDecoder.
func (*ConnectResponse) SentByKasOnly() {}

// SentByKasOnly marks GatewayResponse as a grpctool.FastDecoder.
func (*GatewayResponse) SentByKasOnly() {}

// SentByKasOnly marks HopRequest as a grpctool.FastDecoder.
func (*HopRequest) SentByKasOnly() {}
