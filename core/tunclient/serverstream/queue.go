package serverstream

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// Window is how many request bytes may wait for the service before the tunnel stops reading and gRPC
// flow control holds kas back: the stream window a grpc.Server would give the call.
const Window = grpctool.StreamWindow

// requestQueue holds request messages between the tunnel and the handler, up to a number of bytes. Up
// to that bound the tunnel keeps reading while the handler is busy, so that the end of the call (the
// caller cancelled) reaches the handler's context even when it is not reading, as it would on a
// grpc.Server; beyond it the tunnel stops reading and flow control holds kas back.
type requestQueue struct {
	limit int

	mu     sync.Mutex
	items  []grpctool.RawFrame
	bytes  int
	closed bool          // close_send arrived: after the items, io.EOF
	ready  chan struct{} // one token: items were added or the queue closed
	space  chan struct{} // one token: bytes went down
}

// queueCost is what a message counts against the bound: empty messages are not free.
func queueCost(data []byte) int {
	return len(data) + 64
}

func newRequestQueue(limit int) *requestQueue {
	return &requestQueue{limit: limit, ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push adds f, waiting while the queue is full; once done is closed (the handler returned) it drops f
// instead.
func (q *requestQueue) push(f grpctool.RawFrame, done <-chan struct{}) {
	for {
		q.mu.Lock()
		// One message always fits, however large: the bound is on what waits behind it.
		if q.bytes == 0 || q.bytes+queueCost(f.Data) <= q.limit {
			q.items = append(q.items, f)
			q.bytes += queueCost(f.Data)
			q.mu.Unlock()
			signal(q.ready)
			return
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-done:
			return
		}
	}
}

// close marks the end of the request.
func (q *requestQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.ready)
}

// pop takes the next message: io.EOF after the last one, a status when ctx ends first.
func (q *requestQueue) pop(ctx context.Context) (grpctool.RawFrame, error) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			f := q.items[0]
			q.items[0] = grpctool.RawFrame{}
			q.items = q.items[1:]
			q.bytes -= queueCost(f.Data)
			q.mu.Unlock()
			signal(q.space)
			return f, nil
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return grpctool.RawFrame{}, io.EOF
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return grpctool.RawFrame{}, status.FromContextError(ctx.Err()).Err()
		}
	}
}
