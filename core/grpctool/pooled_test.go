package grpctool

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// countingPool is PayloadPool's pool, recording what is put back.
type countingPool struct {
	mem.BufferPool
	put []*[]byte
}

func (p *countingPool) Put(b *[]byte) { p.put = append(p.put, b) }

func usePool(t *testing.T) *countingPool {
	p := &countingPool{BufferPool: mem.DefaultBufferPool()}
	old := PayloadPool
	PayloadPool = p
	t.Cleanup(func() { PayloadPool = old })
	return p
}

// A pooled frame's buffer goes to gRPC with the frame and back to the pool once gRPC freed it, not
// before; Release puts it back; a frame whose data is no longer its buffer is sent as bytes, the buffer
// left alone.
func TestPooledFrameGoesBackOnceWritten(t *testing.T) {
	p := usePool(t)
	buf := p.Get(PooledMin)
	copy(*buf, "payload")
	f := &RawFrame{Data: *buf, Pooled: buf}
	bs, err := RawCodec{}.Marshal(f)
	if err != nil || !bytes.Equal(bs.Materialize(), *buf) {
		t.Fatalf("marshal: %v, or not the frame's bytes", err)
	}
	if len(p.put) != 0 || f.Pooled != nil {
		t.Fatalf("%d buffers back before gRPC freed them (the frame kept its own: %v)", len(p.put), f.Pooled != nil)
	}
	bs.Free()
	if len(p.put) != 1 || p.put[0] != buf {
		t.Fatalf("%d buffers back once freed, want the frame's", len(p.put))
	}

	released := p.Get(PooledMin)
	r := &RawFrame{Data: *released, Pooled: released}
	r.Release()
	if len(p.put) != 2 || p.put[1] != released || r.Data != nil || r.Pooled != nil {
		t.Fatalf("release: %d back, data left %v", len(p.put), r.Data != nil)
	}

	moved := p.Get(PooledMin)
	other := &RawFrame{Data: []byte("other bytes"), Pooled: moved}
	bs, err = RawCodec{}.Marshal(other)
	if err != nil || string(bs.Materialize()) != "other bytes" {
		t.Fatalf("marshal of a frame whose data moved: %v", err)
	}
	bs.Free()
	if len(p.put) != 2 {
		t.Fatal("a buffer that is not the frame's data went back")
	}
}

// In process, a pooled frame decoded into a message goes back once decoded; one taken as a RawFrame
// stays with its receiver.
func TestMovePutsBackWhatItDecoded(t *testing.T) {
	p := usePool(t)
	msg := wrapperspb.String(strings.Repeat("x", PooledMin))
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	pooledFrame := func() *RawFrame {
		buf := p.Get(len(b))
		copy(*buf, b)
		return &RawFrame{Data: *buf, Pooled: buf}
	}
	src := pooledFrame()
	buf := src.Pooled
	var got wrapperspb.StringValue
	if err := move(&got, src); err != nil || !proto.Equal(&got, msg) {
		t.Fatalf("move into a message: %v", err)
	}
	if len(p.put) != 1 || p.put[0] != buf {
		t.Fatalf("%d buffers back after the decode, want the frame's", len(p.put))
	}
	var raw RawFrame
	if err := move(&raw, pooledFrame()); err != nil || !bytes.Equal(raw.Data, b) || raw.Pooled != nil {
		t.Fatalf("move into a RawFrame: %v", err)
	}
	if len(p.put) != 1 {
		t.Fatal("a buffer went back while its receiver holds the data")
	}
}

// A large message sent in process to a receiver of RawFrames (kas's pump) arrives in a buffer of
// PayloadPool, which TakeShared turns into a buffer counted by references: a frame sharing it is
// encoded without a copy and with a reference of the write's own, so the buffer goes back only once the
// sender and the write both let go. A small message arrives as a plain slice.
func TestLargeMessageMovesPooledAndShared(t *testing.T) {
	p := usePool(t)
	msg := wrapperspb.String(strings.Repeat("x", PooledMin))
	want, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	var raw RawFrame
	if err := move(&raw, msg); err != nil || !bytes.Equal(raw.Data, want) || raw.Pooled == nil {
		t.Fatalf("move: %v, pooled %v", err, raw.Pooled != nil)
	}
	shared := raw.TakeShared()
	if shared == nil || raw.Pooled != nil {
		t.Fatal("a pooled frame did not become a shared buffer")
	}
	bs, err := RawCodec{}.Marshal(&RawFrame{Data: raw.Data, Shared: shared})
	if err != nil || !bytes.Equal(bs.Materialize(), want) {
		t.Fatalf("marshal: %v, or not the message's bytes", err)
	}
	shared.Free() // the sender's reference: the write holds its own
	if len(p.put) != 0 {
		t.Fatal("the buffer went back while the write held it")
	}
	bs.Free()
	if len(p.put) != 1 {
		t.Fatalf("%d buffers back once everyone let go, want 1", len(p.put))
	}

	var small RawFrame
	if err := move(&small, wrapperspb.String("small")); err != nil || small.Pooled != nil || small.TakeShared() != nil {
		t.Fatalf("a small message: %v, pooled %v", err, small.Pooled != nil)
	}
}
