package pingack

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/internal/testcerts"
)

// slowEcho answers each call after a pause, as kas does while it routes a call to an agent: long enough
// for the server to write the ACK of the client's bandwidth probe before the answer.
func slowEcho(_ any, stream grpc.ServerStream) error {
	var m wrapperspb.BytesValue
	if err := stream.RecvMsg(&m); err != nil {
		return err
	}
	time.Sleep(200 * time.Microsecond)
	return stream.SendMsg(&m)
}

// callThrough serves slowEcho behind l with opts and makes calls with a gRPC-go client on default
// windows (which probe the bandwidth with a PING per call's answer), each of which must answer its own
// request.
func callThrough(t *testing.T, l net.Listener, clientCreds credentials.TransportCredentials, opts ...grpc.ServerOption) {
	t.Helper()
	srv := grpc.NewServer(append(opts, grpc.UnknownServiceHandler(slowEcho))...)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	defer func() {
		srv.Stop()
		<-served
	}()
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(clientCreds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 100 {
		in := wrapperspb.Bytes([]byte{byte(i), 1, 2, 3})
		out := new(wrapperspb.BytesValue)
		if err := cc.Invoke(ctx, "/test.Echo/Echo", in, out); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if string(out.GetValue()) != string(in.GetValue()) {
			t.Fatalf("call %d answered %x; want %x", i, out.GetValue(), in.GetValue())
		}
	}
}

func TestGRPCOverListenerHoldsAcksAndReadsOnReady(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var counts Counts
	l := &capturingListener{Listener: Listener(raw, &counts), conns: make(chan net.Conn, 4)}
	callThrough(t, l, insecure.NewCredentials())
	checkHeld(t, &counts)
	c := <-l.conns
	if r := c.(*tcpConn).readyReads.Load(); r == 0 {
		t.Error("gRPC did not read the connection through ReadOnReady: it reads it through a buffer of its own")
	}
}

func TestGRPCOverTLSHoldsAcks(t *testing.T) {
	certs := testcerts.New(t)
	reloader, err := tlsfiles.NewReloader(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var counts Counts
	serverCreds := Credentials(credentials.NewTLS(tlsfiles.Server(reloader, nil)), &counts)
	clientCreds := credentials.NewTLS(&tls.Config{RootCAs: certs.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	callThrough(t, l, clientCreds, grpc.Creds(serverCreds), grpc.ReadBufferSize(0))
	checkHeld(t, &counts)
}

// checkHeld wants ACKs held on a good share of 100 calls (gRPC-go's client probes on about every other
// call here, every call in make bench), and most of them gone with an answer rather than alone.
func checkHeld(t *testing.T, counts *Counts) {
	t.Helper()
	h, a := counts.Held.Load(), counts.Alone.Load()
	if h < 20 {
		t.Errorf("%d ACKs held over 100 calls; want at least 20", h)
	}
	if a > h/2 {
		t.Errorf("%d of %d held ACKs left alone; want most with an answer", a, h)
	}
}

// capturingListener hands each accepted connection to the test.
type capturingListener struct {
	net.Listener
	conns chan net.Conn
}

func (l *capturingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		select {
		case l.conns <- c:
		default:
		}
	}
	return c, err
}
