package serverstream

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

func TestRequestQueueBoundsWhatWaits(t *testing.T) {
	q := newRequestQueue(3 * queueCost(make([]byte, 10)))
	never := make(chan struct{})
	for range 3 {
		q.push(frame(make([]byte, 10)), never)
	}
	pushed := make(chan struct{})
	go func() {
		q.push(frame(make([]byte, 10)), never) // the fourth waits for room
		close(pushed)
	}()
	select {
	case <-pushed:
		t.Fatal("a push beyond the bound did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	ctx := context.Background()
	if _, err := q.pop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pushed:
	case <-time.After(10 * time.Second):
		t.Fatal("a pop did not make room")
	}
	q.close()
	for range 3 {
		if _, err := q.pop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.pop(ctx); err != io.EOF {
		t.Fatalf("after the last message: %v, want io.EOF", err)
	}
}

func TestRequestQueueTakesOneLargeMessageAndDropsAfterDone(t *testing.T) {
	q := newRequestQueue(16)
	never := make(chan struct{})
	q.push(frame(make([]byte, 1<<20)), never) // larger than the bound, but nothing waits before it
	done := make(chan struct{})
	close(done)
	q.push(frame([]byte("late")), done) // full, and the handler returned: dropped, not waited for
	f, err := q.pop(context.Background())
	if err != nil || len(f.Data) != 1<<20 {
		t.Fatalf("pop: %v, %v", f, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.pop(ctx); status.Code(err) != codes.Canceled {
		t.Fatalf("pop of an empty queue after the call ended: %v, want Canceled", err)
	}
}

func TestRequestQueueCountsEmptyMessages(t *testing.T) {
	q := newRequestQueue(2 * queueCost(nil))
	done := make(chan struct{})
	close(done)
	for range 100 {
		q.push(frame(nil), done)
	}
	if len(q.items) != 2 {
		t.Fatalf("%d empty messages queued, want 2: empty messages must count", len(q.items))
	}
}

func frame(data []byte) grpctool.RawFrame { return grpctool.RawFrame{Data: data} }
