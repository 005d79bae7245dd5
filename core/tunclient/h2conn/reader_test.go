package h2conn

import (
	"crypto/tls"
	"net"
	"testing"
)

// TestConnReaderKinds: a socket gets the pooled reader, TLS none of ours (crypto/tls buffers a record;
// a buffer in front would be held by every idle agent), anything else a bufio.Reader.
func TestConnReaderKinds(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	tc := tls.Client(a, &tls.Config{ServerName: "kas"})
	if r := newConnReader(tc); r != tc {
		t.Errorf("TLS: reader %T, want the *tls.Conn itself", r)
	}
	if _, ok := newConnReader(b).(*socketReader); ok {
		t.Error("an in-memory connection got the socket reader")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := newConnReader(c).(*socketReader); !ok {
		t.Error("a TCP connection did not get the pooled socket reader")
	}
}
