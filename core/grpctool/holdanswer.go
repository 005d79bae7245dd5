package grpctool

import (
	"context"

	"google.golang.org/grpc"
)

// AnswerHolder is a server stream that can hold what its handler sends from now on and send it in one
// piece when the handler returns, with the call's end: the agent's stream of a call served from a
// reusable tunnel (one tunnel message and one wake-up of kas's reader instead of one per message).
type AnswerHolder interface {
	HoldAnswer()
}

// HoldAnswer tells the stream of the handler's call that the rest of its answer is at hand: every
// message it sends from now on will be followed at once by its return. It reports whether the stream
// holds the answer; on any other stream (a grpc.Server's) it does nothing and messages leave as sent.
// Only the handler's goroutine may call it, and only when nothing it sends afterwards waits on anything
// but the handler itself: a held message leaves when the handler returns.
func HoldAnswer(ctx context.Context) bool {
	h, ok := grpc.ServerTransportStreamFromContext(ctx).(AnswerHolder)
	if ok {
		h.HoldAnswer()
	}
	return ok
}
