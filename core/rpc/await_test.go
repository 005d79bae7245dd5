package rpc

import "testing"

// awaitingStream counts the waits that reach it.
type awaitingStream struct {
	ReverseTunnel_ConnectClient
	waits int
}

func (s *awaitingStream) AwaitReceived() { s.waits++ }

// TestAwaitReceivedThroughWrappers: the wait reaches the stream through the batch and end wrappers,
// unless a wrapper has something to hand out already.
func TestAwaitReceivedThroughWrappers(t *testing.T) {
	inner := &awaitingStream{}
	batched := &BatchedConnectClient{ReverseTunnel_ConnectClient: inner}
	ending := &EndingConnectClient{ReverseTunnel_ConnectClient: batched}
	AwaitReceived(ending)
	if inner.waits != 1 {
		t.Fatalf("%d waits reached the stream, want 1", inner.waits)
	}
	batched.in.pending = []*ConnectResponse{{}}
	AwaitReceived(ending)
	if inner.waits != 1 {
		t.Error("a batch's pending message did not end the wait at once")
	}
	batched.in.pending = nil
	ending.ended = true
	AwaitReceived(ending)
	if inner.waits != 1 {
		t.Error("an ended tunnel waited on its stream")
	}
	AwaitReceived(&struct{ ReverseTunnel_ConnectClient }{}) // a stream that cannot wait: Recv will
}
