package pingack

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/mem"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ack is a PING ACK frame as gRPC-go's server writes it: the ping's 8 bytes echoed.
var ack = []byte{0, 0, 8, 0x6, 0x1, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}

// data is any other write: a DATA frame header and 3 bytes.
var data = []byte{0, 0, 3, 0x0, 0x0, 0, 0, 0, 1, 'a', 'b', 'c'}

// recordingConn records each Write as the peer would see it; failWrites makes every write fail.
type recordingConn struct {
	net.Conn
	mu         sync.Mutex
	writes     [][]byte
	failWrites bool
	written    chan struct{}
}

func newRecordingConn() *recordingConn { return &recordingConn{written: make(chan struct{}, 16)} }

func (r *recordingConn) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { r.written <- struct{}{} }()
	if r.failWrites {
		return 0, errors.New("broken pipe")
	}
	r.writes = append(r.writes, bytes.Clone(b))
	return len(b), nil
}

func (r *recordingConn) Close() error { return nil }

func (r *recordingConn) recorded() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

func TestLoneAckLeavesWithTheNextWrite(t *testing.T) {
	rec := newRecordingConn()
	var counts Counts
	c := newConn(rec, &counts)
	defer c.Close()
	if n, err := c.Write(ack); n != len(ack) || err != nil {
		t.Fatalf("Write(ack) = %d, %v; want %d, nil", n, err, len(ack))
	}
	if w := rec.recorded(); len(w) != 0 {
		t.Fatalf("a lone ACK was written at once: %x", w)
	}
	if n, err := c.Write(data); n != len(data) || err != nil {
		t.Fatalf("Write(data) = %d, %v; want %d, nil", n, err, len(data))
	}
	want := append(bytes.Clone(ack), data...)
	if w := rec.recorded(); len(w) != 1 || !bytes.Equal(w[0], want) {
		t.Fatalf("writes = %x; want one write %x", w, want)
	}
	if h, a := counts.Held.Load(), counts.Alone.Load(); h != 1 || a != 0 {
		t.Fatalf("held %d, alone %d; want 1, 0", h, a)
	}
}

func TestLoneAckLeavesAloneAfterHold(t *testing.T) {
	rec := newRecordingConn()
	var counts Counts
	c := newConn(rec, &counts)
	defer c.Close()
	start := time.Now()
	if _, err := c.Write(ack); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.written:
	case <-time.After(5 * time.Second):
		t.Fatal("a held ACK never left")
	}
	if held := time.Since(start); held < Hold {
		t.Errorf("the ACK left after %v, before Hold (%v)", held, Hold)
	}
	if w := rec.recorded(); len(w) != 1 || !bytes.Equal(w[0], ack) {
		t.Fatalf("writes = %x; want the ACK alone", w)
	}
	if a := counts.Alone.Load(); a != 1 {
		t.Fatalf("alone = %d; want 1", a)
	}
	// The next write goes at once, without the ACK again.
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	if w := rec.recorded(); len(w) != 2 || !bytes.Equal(w[1], data) {
		t.Fatalf("writes = %x; want the data alone second", w)
	}
}

func TestOnlyALoneAckIsHeld(t *testing.T) {
	ping := bytes.Clone(ack)
	ping[4] = 0 // a PING that asks for an ACK
	onStream := bytes.Clone(ack)
	onStream[8] = 1 // a PING frame is on stream 0 only; anything else is not one
	longer := append(bytes.Clone(ack), 0)
	longer[2] = 9
	for name, b := range map[string][]byte{
		"ping":               ping,
		"17 bytes, stream 1": onStream,
		"9-byte payload":     longer,
		"ack and data":       append(bytes.Clone(ack), data...),
		"data":               data,
		"empty":              {},
	} {
		t.Run(name, func(t *testing.T) {
			rec := newRecordingConn()
			var counts Counts
			c := newConn(rec, &counts)
			defer c.Close()
			if n, err := c.Write(b); n != len(b) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if w := rec.recorded(); len(w) != 1 || !bytes.Equal(w[0], b) {
				t.Fatalf("writes = %x; want %x at once", w, b)
			}
			if h := counts.Held.Load(); h != 0 {
				t.Fatalf("held = %d; want 0", h)
			}
		})
	}
}

func TestAFailedWriteOfAHeldAckFailsTheNextWrite(t *testing.T) {
	rec := newRecordingConn()
	rec.failWrites = true
	c := newConn(rec, nil)
	defer c.Close()
	if _, err := c.Write(ack); err != nil {
		t.Fatalf("holding the ACK failed: %v", err)
	}
	select {
	case <-rec.written:
	case <-time.After(5 * time.Second):
		t.Fatal("a held ACK was never written")
	}
	if _, err := c.Write(data); err == nil {
		t.Fatal("the write after a failed one succeeded")
	}
	if w := rec.recorded(); len(w) != 0 {
		t.Fatalf("writes = %x after a failure", w)
	}
}

func TestCloseDropsAHeldAckAndItsTimer(t *testing.T) {
	rec := newRecordingConn()
	c := newConn(rec, nil)
	if _, err := c.Write(ack); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * Hold)
	if w := rec.recorded(); len(w) != 0 {
		t.Fatalf("a closed connection wrote %x", w)
	}
}

// tcpPair returns the server's side of a loopback TCP connection, accepted through Listener, and the
// client's.
func tcpPair(t *testing.T, counts *Counts) (server, client net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pl := Listener(l, counts)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := pl.Accept()
		if err != nil {
			c = nil
		}
		accepted <- c
	}()
	client, err = net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case server = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
	}
	if server == nil {
		t.Fatal("Accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestSocketWritesTheAckThenTheNextWrite(t *testing.T) {
	var counts Counts
	server, client := tcpPair(t, &counts)
	if _, ok := server.(*tcpConn); !ok {
		t.Fatalf("Listener accepted a %T; want a *tcpConn", server)
	}
	if _, err := server.Write(ack); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Write(data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(ack)+len(data))
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if want := append(bytes.Clone(ack), data...); !bytes.Equal(got, want) {
		t.Fatalf("the peer read %x; want %x", got, want)
	}
	if h, a := counts.Held.Load(), counts.Alone.Load(); h != 1 || a != 0 {
		t.Fatalf("held %d, alone %d; want 1, 0", h, a)
	}
}

func TestSocketReadOnReady(t *testing.T) {
	server, client := tcpPair(t, nil)
	rr := server.(*tcpConn)
	pool := mem.DefaultBufferPool()
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf, n, err := rr.ReadOnReady(64, pool)
	if err != nil || string((*buf)[:n]) != "hello" {
		t.Fatalf("ReadOnReady = %q, %v; want hello", (*buf)[:n], err)
	}
	pool.Put(buf)
	client.Close()
	if buf, n, err := rr.ReadOnReady(64, pool); !errors.Is(err, io.EOF) || buf != nil || n != 0 {
		t.Fatalf("after the peer closed: %v, %d, %v; want nil, 0, EOF", buf, n, err)
	}
	// A read deadline ends the wait without a buffer taken.
	_ = server.SetReadDeadline(time.Now().Add(-time.Second))
	if buf, _, err := rr.ReadOnReady(64, pool); err == nil || buf != nil {
		t.Fatalf("past the deadline: %v, %v; want an error and no buffer", buf, err)
	}
}

// TestCloseEndsAWriteBlockedOnAPeerThatDoesNotRead: the held ACK's own write blocks on a peer that reads
// nothing (net.Pipe writes wait for a reader), then the server's next write waits behind it; closing the
// connection must end both, as it ends a plain connection's blocked write.
func TestCloseEndsAWriteBlockedOnAPeerThatDoesNotRead(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	c := newConn(server, nil)
	if _, err := c.Write(ack); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * Hold) // the held ACK's write is now blocked
	blocked := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		blocked <- err
	}()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for _, ch := range []chan error{closed, blocked} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end the blocked writes")
		}
	}
}
