package grpctool

import (
	"bytes"
	"slices"
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

// largeMessage is a message of LargeMin bytes and more, and its encoding.
func largeMessage(t *testing.T) (*wrapperspb.StringValue, []byte) {
	msg := wrapperspb.String(strings.Repeat("x", LargeMin))
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return msg, b
}

// A pooled frame's buffer goes to gRPC with the frame and back to the pool once gRPC freed it, not
// before; Release puts it back; a frame whose data is no longer its buffer is sent as bytes, the buffer
// left alone.
func TestPooledFrameGoesBackOnceWritten(t *testing.T) {
	p := usePool(t)
	buf := p.Get(LargeMin)
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

	released := p.Get(LargeMin)
	r := &RawFrame{Data: *released, Pooled: released}
	r.Release()
	if len(p.put) != 2 || p.put[1] != released || r.Data != nil || r.Pooled != nil {
		t.Fatalf("release: %d back, data left %v", len(p.put), r.Data != nil)
	}

	moved := p.Get(LargeMin)
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
	msg, b := largeMessage(t)
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

// A large message sent in process to a receiver that keeps it shared (kas's pump) arrives in a buffer
// of PayloadPool counted by references: a frame sharing it is encoded without a copy and with a
// reference of the write's own, so the buffer goes back only once the receiver and the write both let
// go. A small message, or a receiver that does not ask, gets a plain slice.
func TestLargeMessageMovesShared(t *testing.T) {
	p := usePool(t)
	msg, want := largeMessage(t)
	raw := RawFrame{KeepShared: true}
	if err := move(&raw, msg); err != nil || !bytes.Equal(raw.Data, want) || raw.Shared == nil || raw.Pooled != nil {
		t.Fatalf("move: %v, shared %v", err, raw.Shared != nil)
	}
	bs, err := RawCodec{}.Marshal(&RawFrame{Data: raw.Data, Shared: raw.Shared})
	if err != nil || !bytes.Equal(bs.Materialize(), want) {
		t.Fatalf("marshal: %v, or not the message's bytes", err)
	}
	raw.Shared.Free() // the receiver's reference: the write holds its own
	if len(p.put) != 0 {
		t.Fatal("the buffer went back while the write held it")
	}
	bs.Free()
	if len(p.put) != 1 {
		t.Fatalf("%d buffers back once everyone let go, want 1", len(p.put))
	}

	small := RawFrame{KeepShared: true}
	if err := move(&small, wrapperspb.String("small")); err != nil || small.Shared != nil {
		t.Fatalf("a small message: %v, shared %v", err, small.Shared != nil)
	}
	var plain RawFrame
	if err := move(&plain, msg); err != nil || plain.Shared != nil || plain.Pooled != nil || !bytes.Equal(plain.Data, want) {
		t.Fatalf("a receiver that did not ask: %v, shared %v", err, plain.Shared != nil)
	}
}

// Received from gRPC, a message of MediumMin bytes or more that the receiver keeps shared is gRPC's own
// buffer when it came in one (a reference of the receiver's) and a buffer of PayloadPool otherwise; a
// smaller one, or one for a receiver that did not ask, is a new slice.
func TestRawCodecKeepsLargeMessagesShared(t *testing.T) {
	p := usePool(t)
	data := bytes.Repeat([]byte("y"), LargeMin)
	gp := &countingPool{BufferPool: mem.DefaultBufferPool()}
	own := slices.Clone(data)
	one := mem.NewBuffer(&own, gp)
	f := RawFrame{KeepShared: true}
	if err := (RawCodec{}).Unmarshal(mem.BufferSlice{one}, &f); err != nil || f.Shared == nil || !bytes.Equal(f.Data, data) {
		t.Fatalf("one buffer: %v, shared %v", err, f.Shared != nil)
	}
	one.Free() // gRPC's reference, once Unmarshal returned
	if len(gp.put) != 0 {
		t.Fatal("gRPC's buffer went back while the receiver held it")
	}
	f.Shared.Free()
	if len(gp.put) != 1 {
		t.Fatalf("gRPC's buffer went back %d times once the receiver let go, want once", len(gp.put))
	}

	split := mem.BufferSlice{mem.SliceBuffer(data[:100]), mem.SliceBuffer(data[100:])}
	g := RawFrame{KeepShared: true}
	if err := (RawCodec{}).Unmarshal(split, &g); err != nil || g.Shared == nil || !bytes.Equal(g.Data, data) {
		t.Fatalf("several buffers: %v, shared %v", err, g.Shared != nil)
	}
	g.Shared.Free()
	if len(p.put) != 1 {
		t.Fatalf("%d buffers of PayloadPool back, want the copy's", len(p.put))
	}
	medium := mem.BufferSlice{mem.SliceBuffer(data[:MediumMin/2]), mem.SliceBuffer(data[MediumMin/2 : MediumMin])}
	m := RawFrame{KeepShared: true}
	if err := (RawCodec{}).Unmarshal(medium, &m); err != nil || m.Shared == nil || !bytes.Equal(m.Data, data[:MediumMin]) {
		t.Fatalf("medium: %v, shared %v", err, m.Shared != nil)
	}
	m.Shared.Free()

	for name, c := range map[string]struct {
		data []byte
		keep bool
	}{"small": {data[:MediumMin-1], true}, "not asked": {data, false}} {
		h := RawFrame{KeepShared: c.keep}
		if err := (RawCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(c.data)}, &h); err != nil || h.Shared != nil || !bytes.Equal(h.Data, c.data) {
			t.Fatalf("%s: %v, shared %v", name, err, h.Shared != nil)
		}
	}
}

// A frame received as bytes with a buffer of their own: a RawFrame that keeps messages shared takes the
// buffer with the caller's reference; a plain RawFrame and a protobuf message get the bytes.
func TestUnmarshalSharedFrame(t *testing.T) {
	m, encoded := largeMessage(t)
	data := slices.Clone(encoded)
	buf := mem.NewBuffer(&data, mem.DefaultBufferPool()) // the caller's reference, never freed here

	shared := RawFrame{KeepShared: true, Pooled: new([]byte)}
	if err := UnmarshalSharedFrame(data, buf, &shared); err != nil {
		t.Fatal(err)
	}
	if shared.Shared != buf || !bytes.Equal(shared.Data, data) || shared.Pooled != nil {
		t.Fatalf("KeepShared frame: Shared %v, %d bytes, Pooled %v; want the buffer and its bytes", shared.Shared, len(shared.Data), shared.Pooled)
	}
	plain := RawFrame{Shared: buf}
	if err := UnmarshalSharedFrame(data, buf, &plain); err != nil {
		t.Fatal(err)
	}
	if plain.Shared != nil || !bytes.Equal(plain.Data, data) {
		t.Fatalf("plain frame: Shared %v, %d bytes; want the bytes alone", plain.Shared, len(plain.Data))
	}
	var decoded wrapperspb.StringValue
	if err := UnmarshalSharedFrame(data, buf, &decoded); err != nil || decoded.GetValue() != m.GetValue() {
		t.Fatalf("protobuf message: %v, %d bytes decoded", err, len(decoded.GetValue()))
	}
}
