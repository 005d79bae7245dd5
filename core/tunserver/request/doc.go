// Package request carries a routed call's request, the caller's messages and half-close, to wherever
// the call goes: a tunnel of this kas or a gateway kas (a Target). Its Pump reads only once the call
// has a target, and keeps what it read until the agent accepts the call, up to a bound, so that the
// call can move to another tunnel or gateway and be replayed there whole and in order. A call whose
// caller sends one request (a unary or server-streaming method, as the agent's descriptor says) is read
// by the goroutine that attaches it, with no reader goroutine of its own.
//
// It never decodes a message, never holds more than the replay bound (it stops reading instead, and
// gRPC flow control holds the caller back), and never reads on after the call ended.
package request
