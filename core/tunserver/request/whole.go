package request

import "context"

// MaxWholeMessages bounds WithWholeRequest's messages: a whole request goes to the agent as one batch,
// with its request_info and close_send.
const MaxWholeMessages = 8

type wholeRequestKey struct{}

// WithWholeRequest marks the context of a call whose caller, in this process, sends its whole request
// at once: messages request messages (at most MaxWholeMessages), then the half-close, without waiting
// for an answer. kas then reads the request at the call's first attach and sends it to the agent with
// its request_info as one batch, as it does for a method whose caller sends one request. Only a caller
// inside kas can say so (it is a context value, not metadata): a caller over the network cannot make
// kas wait on it. kas's HTTP handler says so for a request without a body.
func WithWholeRequest(ctx context.Context, messages int) context.Context {
	if messages < 1 || messages > MaxWholeMessages {
		return ctx
	}
	return context.WithValue(ctx, wholeRequestKey{}, messages)
}

// WholeRequest is how many messages the call's caller said it sends at once (WithWholeRequest), or 0.
func WholeRequest(ctx context.Context) int {
	n, _ := ctx.Value(wholeRequestKey{}).(int)
	return n
}
