package tunnelwriter

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool/pooltest"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// encodingStream is a tunnel's Connect stream that encodes what kas sends as gRPC does and keeps it.
type encodingStream struct{ pooltest.Encoder }

func (s *encodingStream) Send(m *rpc.ConnectResponse) error { return s.SendMsg(m) }

// A medium request message whose data is a shared buffer is held like any other: it leaves in one batch
// with its call's request_info and close_send, the bytes of that batch exactly, and the writer's own
// reference keeps the buffer until the batch's encoding is freed (a payload copied into the batch, until
// it is encoded).
func TestHeldSharedMessageJoinsTheBatch(t *testing.T) {
	for _, n := range []int{1000, 4 << 10} {
		data := bytes.Repeat([]byte{7}, n)
		pool := pooltest.NewCountingPool()
		b := pool.Get(n)
		copy(*b, data)
		buf := mem.NewBuffer(b, pool) // the pump's reference
		s := &encodingStream{}
		w := &Writer{Stream: s, Batches: true}
		w.Hold(testInfo)
		w.HoldShared(&rpc.SharedResponseMessage{Buf: buf})
		buf.Free() // the pump lets go once Send returns
		if pool.Puts() != 0 {
			t.Fatalf("%d bytes: the buffer went back while held", n)
		}
		if err := w.Send(testCloseSend); err != nil {
			t.Fatal(err)
		}
		want, err := proto.Marshal(batch([]*rpc.ConnectResponse{testInfo, {Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: data}}}, testCloseSend}))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Sent) != 1 || !bytes.Equal(s.Sent[0].Materialize(), want) {
			t.Fatalf("%d bytes: sent %d messages, want one: the batch of request_info, the message and close_send", n, len(s.Sent))
		}
		copied := n <= 1024 // rpc's batchInlineMax
		if back := pool.Puts() == 1; back != copied {
			t.Fatalf("%d bytes: buffer back before the encoding was freed: %v, want %v", n, back, copied)
		}
		s.Sent[0].Free()
		if pool.Puts() != 1 {
			t.Fatalf("%d bytes: the buffer went back %d times, want once", n, pool.Puts())
		}
	}
}

// A held shared message on its own (the flush after CallEndDelay, or a tunnel's end) goes as a
// SharedResponseMessage, and the writer's reference goes with the write.
func TestHeldSharedMessageFlushesAlone(t *testing.T) {
	pool := pooltest.NewCountingPool()
	b := pool.Get(4 << 10)
	buf := mem.NewBuffer(b, pool)
	s := &encodingStream{}
	w := &Writer{Stream: s, Batches: true}
	w.HoldShared(&rpc.SharedResponseMessage{Buf: buf})
	buf.Free()
	w.mu.Lock()
	err := w.flushLocked()
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if len(s.Sent) != 1 || pool.Puts() != 0 {
		t.Fatalf("sent %d messages, buffer back %d times; want one message holding it", len(s.Sent), pool.Puts())
	}
	s.Sent[0].Free()
	if pool.Puts() != 1 {
		t.Fatalf("the buffer went back %d times once written, want once", pool.Puts())
	}
}
