package pingack

import (
	"net"

	"google.golang.org/grpc/credentials"
)

// Listener returns l with every accepted socket holding its lone PING ACKs (see the package doc). Use it
// for a plaintext gRPC server; a connection that is not a *net.TCPConn is passed on as it is. counts
// may be nil.
func Listener(l net.Listener, counts *Counts) net.Listener {
	return &listener{Listener: l, counts: counts}
}

type listener struct {
	net.Listener
	counts *Counts
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	w, err := newTCPConn(tc, l.counts)
	if err != nil {
		// A socket without a file descriptor cannot be read the way gRPC reads one; serve it as it is.
		return c, nil
	}
	return w, nil
}

// Credentials returns tc with every connection it secures holding its lone PING ACKs above the
// encryption, where they can be recognized. Use it for a gRPC server over TLS, with a Listener beneath
// it adding nothing (it would see only encrypted records). counts may be nil.
func Credentials(tc credentials.TransportCredentials, counts *Counts) credentials.TransportCredentials {
	return &creds{TransportCredentials: tc, counts: counts}
}

type creds struct {
	credentials.TransportCredentials
	counts *Counts
}

func (c *creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return newConn(conn, c.counts), info, nil
}

func (c *creds) Clone() credentials.TransportCredentials {
	return &creds{TransportCredentials: c.TransportCredentials.Clone(), counts: c.counts}
}
