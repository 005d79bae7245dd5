package h2conn

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
)

// connReadBuffer is how much one read of the connection may take: two of gRPC's 16 KiB frames.
const connReadBuffer = 32 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, connReadBuffer); return &b }}

// newConnReader returns the reader of a connection's frames. A socket is read into a pooled buffer
// that is held only while it holds unread bytes: a quiet connection waits for readability without
// one (as gRPC-go's server reads). TLS is read as it is: crypto/tls keeps a whole record and hands it
// out from memory, so a buffer of ours in front would only be held, idle, beside it. Other connections
// (in-memory) get a small bufio.Reader.
func newConnReader(nc net.Conn) io.Reader {
	if _, ok := nc.(*tls.Conn); ok {
		return nc
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return bufio.NewReaderSize(nc, readBufferSize)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return bufio.NewReaderSize(nc, readBufferSize)
	}
	s := &socketReader{rc: rc}
	s.readFD = s.readFrom
	return s
}

type socketReader struct {
	rc   syscall.RawConn
	buf  *[]byte
	r, w int
	// readFD is readFrom, bound once: a closure made per read would be an allocation per read.
	readFD func(fd uintptr) bool
	// n and readErr are the last read's result.
	n       int
	readErr error
}

func (s *socketReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if s.r == s.w {
		if s.buf != nil {
			readBufs.Put(s.buf)
			s.buf = nil
		}
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*s.buf)[s.r:s.w])
	s.r += n
	return n, nil
}

// fill waits until the socket is readable and reads what it has, taking a buffer only then.
func (s *socketReader) fill() error {
	err := s.rc.Read(s.readFD)
	n := s.n
	if err == nil {
		err = s.readErr
	}
	if err != nil {
		if s.buf != nil {
			readBufs.Put(s.buf)
			s.buf = nil
		}
		return err
	}
	if n <= 0 {
		readBufs.Put(s.buf)
		s.buf = nil
		return io.EOF
	}
	s.r, s.w = 0, n
	return nil
}

// readFrom reads the readable socket fd into a pooled buffer; it reports false (wait for readability)
// when the socket has nothing yet, without keeping a buffer.
func (s *socketReader) readFrom(fd uintptr) bool {
	buf := readBufs.Get().(*[]byte)
	for {
		s.n, s.readErr = syscall.Read(int(fd), *buf)
		if !errors.Is(s.readErr, syscall.EINTR) {
			break
		}
	}
	if errors.Is(s.readErr, syscall.EAGAIN) {
		readBufs.Put(buf)
		return false
	}
	s.buf = buf
	return true
}
