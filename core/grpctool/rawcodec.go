package grpctool

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// RawFrame is one gRPC message as opaque bytes. Proxies send and receive it with RawCodec so that
// payloads are never decoded.
type RawFrame struct {
	Data []byte
}

// RawCodec passes RawFrame through untouched and falls back to protobuf for every other type, so one
// server can host raw proxy handlers and ordinary protobuf services side by side. Its name is "proto":
// on the wire it is indistinguishable from the default codec.
type RawCodec struct{}

var _ encoding.CodecV2 = RawCodec{}

func protoCodec() encoding.CodecV2 {
	return encoding.GetCodecV2(proto.Name)
}

// Marshal returns a RawFrame's bytes without copying them.
func (RawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*RawFrame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f.Data)}, nil
	}
	return protoCodec().Marshal(v)
}

// Unmarshal copies the received bytes into a RawFrame: gRPC frees data once Unmarshal returns.
func (RawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*RawFrame); ok {
		f.Data = data.Materialize()
		return nil
	}
	if v == nil {
		return fmt.Errorf("raw codec: cannot unmarshal into nil")
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
	bs, err := protoCodec().Marshal(v)
	if err != nil {
		return nil, err
	}
	defer bs.Free()
	return bs.Materialize(), nil
}

// UnmarshalFrame decodes one gRPC message into v: a RawFrame takes data itself (the caller must not reuse
// it), anything else is decoded as protobuf.
func UnmarshalFrame(data []byte, v any) error {
	if f, ok := v.(*RawFrame); ok {
		f.Data = data
		return nil
	}
	if v == nil {
		return fmt.Errorf("raw codec: cannot unmarshal into nil")
	}
	return protoCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, v)
}
