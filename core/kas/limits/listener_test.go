package limits

import (
	"errors"
	"net"
	"testing"
)

func TestListenerCapsOpenConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(inner, 1)
	defer l.Close()
	sem := l.(*limitListener).sem
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.(interface{ CloseWrite() error }); !ok {
		t.Error("a limited connection lost CloseWrite (net/http half-closes after an error answer)")
	}
	if len(sem) != cap(sem) {
		t.Fatalf("%d of %d places taken with one connection open, want the listener full", len(sem), cap(sem))
	}
	// Closing twice gives its place back once.
	_ = first.Close()
	_ = first.Close()
	if len(sem) != 0 {
		t.Fatalf("%d places taken after the only connection closed, want 0", len(sem))
	}
	second, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	// Full, with a connection pending in the kernel: once closed, Accept says so rather than take it.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed full listener: %v, want net.ErrClosed", err)
	}
}
