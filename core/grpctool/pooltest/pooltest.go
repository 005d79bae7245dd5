// Package pooltest has what tests of pooled buffers share: a pool that counts the buffers that come
// back, and the sending side of a stream that encodes as gRPC does and keeps the encodings until the
// test frees them. (grpctool's own tests keep theirs: this package imports grpctool.)
package pooltest

import (
	"sync"

	"google.golang.org/grpc/mem"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// CountingPool is a mem.BufferPool that counts the buffers put back, and puts them back in the pool it
// wraps.
type CountingPool struct {
	mem.BufferPool
	mu  sync.Mutex
	put int
}

// NewCountingPool counts what goes back to gRPC's default pool.
func NewCountingPool() *CountingPool {
	return &CountingPool{BufferPool: mem.DefaultBufferPool()}
}

// Put implements mem.BufferPool.
func (p *CountingPool) Put(b *[]byte) {
	p.mu.Lock()
	p.put++
	p.mu.Unlock()
	p.BufferPool.Put(b)
}

// Puts is how many buffers came back so far.
func (p *CountingPool) Puts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.put
}

// Encoder is the sending side of a stream: SendMsg encodes m with grpctool.RawCodec, as gRPC does, and
// keeps the encoding in Sent for the test to read and free (gRPC frees one once written).
type Encoder struct {
	Sent []mem.BufferSlice
}

// SendMsg implements the sending half of grpc.Stream.
func (e *Encoder) SendMsg(m any) error {
	bs, err := grpctool.RawCodec{}.Marshal(m)
	if err != nil {
		return err
	}
	e.Sent = append(e.Sent, bs)
	return nil
}
