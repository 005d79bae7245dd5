package grpctool

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"
)

// RawFrame is one gRPC message as opaque bytes. Proxies send and receive it with RawCodec so that
// payloads are never decoded.
type RawFrame struct {
	Data []byte
	// Pooled, when set, is the buffer of PayloadPool that Data is (a payload of MediumMin bytes or more
	// received on a tunnel), and whoever holds the frame owns it: RawCodec's Marshal hands it to gRPC, which puts it
	// back once written; Release puts it back. Either way Data must not be read afterwards, so a pooled
	// frame goes only to streams of ours: gRPC lets interceptors and stats handlers read a sent message
	// later. A frame dropped with Pooled set is left to the garbage collector.
	Pooled *[]byte
	// Shared, when set, is a buffer that Data is all of, counted by references (a request of MediumMin bytes
	// or more that kas's pump keeps to replay; see request.Frame): RawCodec's Marshal takes a reference of its own
	// for gRPC, which frees it once written. The sender keeps its own reference until SendMsg returns;
	// like Pooled, a shared frame goes only to streams of ours.
	Shared mem.Buffer
	// KeepShared, set by a receiver before RecvMsg, asks for a message of MediumMin bytes or more in
	// Shared rather than in a new slice: gRPC's own buffer when the message came in one, a buffer of
	// PayloadPool it was copied into otherwise, or, in process, the buffer the sender's message was
	// encoded into. Shared then holds one reference, the receiver's, to free once Data is not needed.
	KeepShared bool
}

// PayloadPool holds the buffers of call payloads of MediumMin bytes or more, received on a tunnel or
// encoded by an agent: gRPC's own pool, where gRPC puts back what it was handed once written.
var PayloadPool = mem.DefaultBufferPool()

// LargeMin is the smallest payload that is large: it travels alone, never in a batch (see
// rpc.BatchMaxBytes).
const LargeMin = 16 << 10

// MediumMin is the smallest payload kept in a buffer of PayloadPool (or counted by references, see
// RawFrame.KeepShared) rather than in a new slice: from 1 KiB on, a new slice per message costs the call
// more than the pool does, in collections and fresh memory (a 4 KiB call through the tunnel once
// made twice direct's garbage and took twice its time).
const MediumMin = 1 << 10

// Release puts f's pooled buffer back, if it has one, once its data was decoded or copied: Data is
// unset, as it must not be read any more.
func (f *RawFrame) Release() {
	if f.Pooled != nil {
		PayloadPool.Put(f.Pooled)
		f.Pooled, f.Data = nil, nil
	}
}

// pooledBuffer is f's pooled buffer as a gRPC buffer that puts it back once freed, when Data is still
// that buffer; f gives it up.
func (f *RawFrame) pooledBuffer() (mem.Buffer, bool) {
	p := f.Pooled
	if p == nil || len(*p) != len(f.Data) || len(f.Data) == 0 || &(*p)[0] != &f.Data[0] {
		return nil, false
	}
	f.Pooled = nil
	return mem.NewBuffer(p, PayloadPool), true
}

// RawCodec passes RawFrame through untouched and falls back to protobuf for every other type, so one
// server can host raw proxy handlers and ordinary protobuf services side by side. Its name is "proto":
// on the wire it is indistinguishable from the default codec.
type RawCodec struct{}

var _ encoding.CodecV2 = RawCodec{}

func protoCodec() encoding.CodecV2 {
	return encoding.GetCodecV2(proto.Name)
}

// BufferMarshaler is a message that can encode itself, or some of its values, without copying its
// payload: into the bytes proto.Marshal would write. ok false means: use protobuf.
type BufferMarshaler interface {
	MarshalBuffers() (bs mem.BufferSlice, ok bool)
}

// BufferUnmarshaler is a message that decodes itself from gRPC's received buffers, which gRPC frees once
// Unmarshal returns (for example into a buffer of PayloadPool that it then owns).
type BufferUnmarshaler interface {
	UnmarshalBuffers(data mem.BufferSlice) error
}

// OwnedUnmarshaler is a message that can decode some of its values by keeping slices of the received
// bytes instead of copying out of them. ok false means: use protobuf. An error refuses b outright (for
// example what protobuf would decode, but into far more memory than b takes).
type OwnedUnmarshaler interface {
	UnmarshalOwned(b []byte) (ok bool, err error)
}

// Marshal returns a RawFrame's bytes, and a BufferMarshaler's payload, without copying them.
func (RawCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *RawFrame:
		if m.Shared != nil {
			m.Shared.Ref()
			return mem.BufferSlice{m.Shared}, nil
		}
		if b, ok := m.pooledBuffer(); ok {
			return mem.BufferSlice{b}, nil
		}
		return mem.BufferSlice{mem.SliceBuffer(m.Data)}, nil
	case BufferMarshaler:
		if bs, ok := m.MarshalBuffers(); ok {
			return bs, nil
		}
	}
	if m, ok := v.(protobuf.Message); ok {
		return protoMarshalBuffers(m)
	}
	return protoCodec().Marshal(v)
}

// Unmarshal copies the received bytes into a RawFrame: gRPC frees data once Unmarshal returns. An
// OwnedUnmarshaler gets the one copy to keep slices of; a BufferUnmarshaler the buffers themselves.
func (RawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *RawFrame:
		m.Pooled, m.Shared = nil, nil
		if m.KeepShared && data.Len() >= MediumMin {
			m.Shared = data.MaterializeToBuffer(PayloadPool)
			m.Data = m.Shared.ReadOnlyData()
			return nil
		}
		m.Data = data.Materialize()
		return nil
	case BufferUnmarshaler:
		return m.UnmarshalBuffers(data)
	case OwnedUnmarshaler:
		b := data.Materialize()
		if ok, err := m.UnmarshalOwned(b); ok || err != nil {
			return err
		}
		return unmarshalProto(b, m)
	case nil:
		return fmt.Errorf("raw codec: cannot unmarshal into nil")
	case protobuf.Message:
		return protoUnmarshalBuffers(data, m)
	}
	return protoCodec().Unmarshal(data, v)
}

// Name is the codec's content subtype.
func (RawCodec) Name() string { return proto.Name }

// RawServerCodec is the server option that makes a server use RawCodec.
func RawServerCodec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(RawCodec{})
}

// RawCallCodec is the call option that makes a client call use RawCodec.
func RawCallCodec() grpc.CallOption {
	return grpc.ForceCodecV2(RawCodec{})
}

// MarshalFrame encodes v as one gRPC message: a RawFrame's bytes as they are, anything else as protobuf.
func MarshalFrame(v any) ([]byte, error) {
	if f, ok := v.(*RawFrame); ok {
		return f.Data, nil
	}
	m, ok := v.(protobuf.Message)
	if !ok {
		return nil, fmt.Errorf("raw codec: %T is not a protobuf message", v)
	}
	return ProtoMarshal(m)
}

// UnmarshalFrame decodes one gRPC message into v: a RawFrame takes data itself (the caller must not reuse
// it), a BufferUnmarshaler decodes itself from it as from gRPC's buffers, anything else is decoded as
// protobuf.
func UnmarshalFrame(data []byte, v any) error {
	switch m := v.(type) {
	case *RawFrame:
		m.Data, m.Pooled, m.Shared = data, nil, nil
		return nil
	case BufferUnmarshaler:
		return m.UnmarshalBuffers(mem.BufferSlice{mem.SliceBuffer(data)})
	}
	return unmarshalProto(data, v)
}

// UnmarshalSharedFrame is UnmarshalFrame for data that is all of shared, a buffer counted by references
// of which the caller holds one: a RawFrame that keeps messages shared (KeepShared) takes shared
// with that reference, as RawCodec's Unmarshal gives it gRPC's buffer; anything else is UnmarshalFrame's,
// and shared is left to the garbage collector (a RawFrame keeps a slice of it). A nil shared is data
// alone.
func UnmarshalSharedFrame(data []byte, shared mem.Buffer, v any) error {
	if f, ok := v.(*RawFrame); ok && f.KeepShared && shared != nil {
		f.Data, f.Pooled, f.Shared = data, nil, shared
		return nil
	}
	return UnmarshalFrame(data, v)
}

func unmarshalProto(b []byte, v any) error {
	m, ok := v.(protobuf.Message)
	if !ok {
		return fmt.Errorf("raw codec: %T is not a protobuf message", v)
	}
	return ProtoUnmarshal(b, m)
}
