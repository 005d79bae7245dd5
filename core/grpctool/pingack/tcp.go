package pingack

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc/mem"
)

// tcpConn is a conn over a socket that gRPC-go's server can still read without pinning a buffer: gRPC
// looks for a ReadOnReady method on the connection (it reads a *net.TCPConn that way itself), waits for
// the socket to be readable and only then takes a buffer from its pool. Without it, a wrapped socket
// would be read through a 32 KiB buffer kept for the connection's life.
type tcpConn struct {
	*conn
	raw syscall.RawConn
	// readyReads counts ReadOnReady calls, so that a test sees gRPC still read this way.
	readyReads atomic.Uint64

	// Only the server's reader goroutine reads, so one set of fields and one callback serve every read
	// without allocating.
	pool    mem.BufferPool
	size    int
	buf     *[]byte
	n       int
	readErr error
	doRead  func(fd uintptr) bool
}

func newTCPConn(c *net.TCPConn, counts *Counts) (net.Conn, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	t := &tcpConn{conn: newConn(c, counts), raw: raw}
	t.doRead = func(fd uintptr) bool {
		t.buf = t.pool.Get(t.size)
		for {
			t.n, t.readErr = syscall.Read(int(fd), *t.buf)
			if t.readErr != syscall.EINTR {
				break
			}
		}
		if t.readErr != nil {
			t.pool.Put(t.buf)
			t.buf = nil
			t.n = 0
		}
		return !errors.Is(t.readErr, syscall.EAGAIN)
	}
	return t, nil
}

// ReadOnReady waits until the socket is readable, then reads up to size bytes into a buffer from pool,
// which the caller puts back. A closed peer reads as io.EOF.
func (t *tcpConn) ReadOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	t.readyReads.Add(1)
	t.pool, t.size = pool, size
	err := t.raw.Read(t.doRead)
	buf, n, readErr := t.buf, t.n, t.readErr
	t.pool, t.buf, t.n, t.readErr = nil, nil, 0, nil
	switch {
	case err != nil: // the connection was closed, or its read deadline passed
		if buf != nil {
			pool.Put(buf)
		}
		return nil, 0, err
	case readErr != nil:
		return nil, 0, readErr
	case n == 0:
		pool.Put(buf)
		return nil, 0, io.EOF
	}
	return buf, n, nil
}
