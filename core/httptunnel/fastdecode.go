package httptunnel

// SentByKasOnly marks HTTPRequest, which kas sends to agents, as a grpctool.FastDecoder: decoded without
// protobuf's reflection. HTTPResponse, which agents send, is decoded by protobuf.
func (*HTTPRequest) SentByKasOnly() {}
