package pingack

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/mem"
)

// Hold is the longest a PING ACK waits for the connection's next write. A call routed through kas
// answers within it at one caller (about 100 µs); a client's keepalive allows seconds for an ACK, and its
// bandwidth probe only overestimates its round trip by this much when nothing else is written, that is
// when no data flows that the probe could measure.
const Hold = time.Millisecond

// ackLen is the length of an HTTP/2 PING frame with the ACK flag: a 9-byte header (length 8, type 6,
// flags 1, stream 0) and 8 bytes of opaque data.
const ackLen = 17

func isLoneAck(b []byte) bool {
	return len(b) == ackLen && b[0] == 0 && b[1] == 0 && b[2] == 8 && b[3] == 0x6 && b[4] == 0x1 &&
		b[5]|b[6]|b[7]|b[8] == 0
}

// Counts are what a listener's connections did with PING ACKs, for tests and operators: Held were kept
// back, Alone of those left by themselves after Hold (the others left with the next write).
type Counts struct {
	Held  atomic.Uint64
	Alone atomic.Uint64
}

// conn holds a lone PING ACK written by the server's writer until its next write or Hold.
type conn struct {
	net.Conn
	counts *Counts
	// writev writes the held ACK and the next write with one system call; without it (crypto/tls, an
	// in-memory connection) they are copied into one Write.
	writev bool

	mu    sync.Mutex
	ack   [ackLen]byte
	held  bool
	timer *time.Timer
	err   error // a failed write of a held ACK, returned by the next Write
	vec   [2][]byte
	bufs  net.Buffers
}

func newConn(c net.Conn, counts *Counts) *conn {
	if counts == nil {
		counts = new(Counts)
	}
	_, writev := c.(*net.TCPConn)
	return &conn{Conn: c, counts: counts, writev: writev}
}

func (c *conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if !c.held {
		if !isLoneAck(b) {
			return c.Conn.Write(b)
		}
		copy(c.ack[:], b)
		c.held = true
		c.counts.Held.Add(1)
		if c.timer == nil {
			c.timer = time.AfterFunc(Hold, c.flushHeld)
		} else {
			c.timer.Reset(Hold)
		}
		return len(b), nil
	}
	c.timer.Stop()
	c.held = false
	if err := c.writeWithAck(b); err != nil {
		c.err = err
		return 0, err
	}
	return len(b), nil
}

// writeWithAck writes the held ACK, then b, in one write.
func (c *conn) writeWithAck(b []byte) error {
	if c.writev {
		c.vec = [2][]byte{c.ack[:], b}
		c.bufs = c.vec[:]
		_, err := c.bufs.WriteTo(c.Conn)
		c.vec = [2][]byte{}
		return err
	}
	buf := mem.DefaultBufferPool().Get(ackLen + len(b))
	defer mem.DefaultBufferPool().Put(buf)
	copy((*buf)[copy(*buf, c.ack[:]):], b)
	_, err := c.Conn.Write(*buf)
	return err
}

// flushHeld writes a held ACK that no other write took along.
func (c *conn) flushHeld() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held || c.err != nil {
		return
	}
	c.held = false
	c.counts.Alone.Add(1)
	if _, err := c.Conn.Write(c.ack[:]); err != nil {
		c.err = err
	}
}

// Close closes the connection first: a write blocked on a peer that does not read holds mu, and only
// the connection's end releases it.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.held = false
	c.mu.Unlock()
	return err
}
