package h2conn_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/tunclient/h2conn"
)

// rawServer answers one call with body, a gRPC response stream's DATA bytes, cut into DATA frames of
// the sizes in cuts (the rest in frames of 16 KiB), then trailers with status OK and the connection's
// end, unless cut short. gRPC-go's
// server never puts two messages in one frame; other servers may, and this one does.
func rawServer(t *testing.T, body []byte, cuts []int, trailers bool) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = lis.Close()
		wg.Wait()
	})
	wg.Go(func() {
		nc, err := lis.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(nc, preface); err != nil {
			return
		}
		fr := http2.NewFramer(nc, nc)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		if fr.WriteSettings() != nil {
			return
		}
		// The request's HEADERS first; then the client's frames are read and dropped until it closes.
		var id uint32
		for id == 0 {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if h, ok := f.(*http2.MetaHeadersFrame); ok {
				id = h.StreamID
			}
		}
		var reads sync.WaitGroup
		defer reads.Wait()
		defer nc.Close() // ends the reads below before they are waited for
		reads.Go(func() {
			for {
				if _, err := fr.ReadFrame(); err != nil {
					return
				}
			}
		})
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}) != nil {
			return
		}
		rest := body
		for _, n := range cuts {
			if fr.WriteData(id, false, rest[:n]) != nil {
				return
			}
			rest = rest[n:]
		}
		for len(rest) > 0 {
			n := min(len(rest), 16<<10) // the client's frame size
			if fr.WriteData(id, !trailers && n == len(rest), rest[:n]) != nil {
				return
			}
			rest = rest[n:]
		}
		if !trailers {
			reads.Wait() // until the client closes: its reader sees the stream's end, not the connection's
			return
		}
		hb.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: "0"})
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: true}) != nil {
			return
		}
		// The connection ends in order (FIN) right after the call, likely before the client read all of
		// it: what the client received must still be read.
		_ = nc.(*net.TCPConn).CloseWrite()
		reads.Wait()
	})
	return lis.Addr().String()
}

// grpcMessages is the DATA bytes of a response stream of one StreamingOutputCallResponse per payload.
func grpcMessages(t *testing.T, payloads ...[]byte) []byte {
	t.Helper()
	var out []byte
	for _, p := range payloads {
		m, err := proto.Marshal(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: p}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, 0)
		out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
		out = append(out, m...)
	}
	return out
}

// rawCall makes the one call a rawServer at addr answers, over a connection whose windows hold its
// whole answer (rawServer ignores window updates).
func rawCall(t *testing.T, addr string) testgrpc.TestService_StreamingOutputCallClient {
	t.Helper()
	c := dial(t, addr, h2conn.Options{StreamWindow: 1 << 20, ConnectionWindow: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	s, err := testgrpc.NewTestServiceClient(c).StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMessagesAcrossFrames: large messages (read as the frames' own buffers) and small ones that begin
// and end inside frames, beside other messages, arrive whole and in order.
func TestMessagesAcrossFrames(t *testing.T) {
	var payloads [][]byte
	for _, n := range []int{40_000, 3, 16 << 10, 70_001, 0, 100_000} {
		payloads = append(payloads, payload(n).Body)
	}
	body := grpcMessages(t, payloads...)
	// Frames that end a few bytes into a message, inside a prefix, and mid-message.
	cuts := []int{7, 16 << 10, 2, 16 << 10, 16 << 10, 9000, 16 << 10, 16 << 10, 16 << 10, 16 << 10, 16 << 10, 3, 16 << 10}
	s := rawCall(t, rawServer(t, body, cuts, true))
	for i, want := range payloads {
		got, err := s.Recv()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !bytes.Equal(got.GetPayload().GetBody(), want) {
			t.Fatalf("message %d: %d bytes that differ from the %d sent", i, len(got.GetPayload().GetBody()), len(want))
		}
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("after the last message: %v, want io.EOF", err)
	}
}

// TestStreamEndsInsideLargeMessage: a server that ends the stream partway through a large message
// gets Internal, not a short message.
func TestStreamEndsInsideLargeMessage(t *testing.T) {
	body := grpcMessages(t, payload(50_000).Body)
	s := rawCall(t, rawServer(t, body[:30_000], []int{16 << 10}, false))
	if _, err := s.Recv(); status.Code(err) != codes.Internal {
		t.Fatalf("a stream that ends inside a message: %v, want Internal", err)
	}
}

// TestAwaitReceived: AwaitReceived returns once a message arrived, without taking it, and once the
// stream ended or was cancelled.
func TestAwaitReceived(t *testing.T) {
	addr, _ := start(t, &server{})
	c := dial(t, addr, h2conn.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := testgrpc.NewTestServiceClient(c).FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := s.(interface{ AwaitReceived() })
	if !ok {
		if g, isGeneric := s.(*grpc.GenericClientStream[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]); isGeneric {
			a, ok = g.ClientStream.(interface{ AwaitReceived() })
		}
	}
	if !ok {
		t.Fatalf("%T does not await", s)
	}
	if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(3)}); err != nil {
		t.Fatal(err)
	}
	a.AwaitReceived()
	a.AwaitReceived() // nothing was taken: still there
	if m, err := s.Recv(); err != nil || len(m.GetPayload().GetBody()) != 3 {
		t.Fatalf("after AwaitReceived: %v, %v", m, err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	a.AwaitReceived() // the server's end
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("the end: %v", err)
	}

	cctx, ccancel := context.WithCancel(ctx)
	s2, err := testgrpc.NewTestServiceClient(c).FullDuplexCall(cctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s2.(*grpc.GenericClientStream[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]).ClientStream.(interface{ AwaitReceived() }).AwaitReceived()
	}()
	ccancel()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("a cancelled stream's AwaitReceived did not return")
	}
	if _, err := s2.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("a cancelled stream: %v", err)
	}
}
