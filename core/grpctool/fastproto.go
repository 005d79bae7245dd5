package grpctool

import (
	"fmt"
	"slices"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// This project's messages are also generated with vtprotobuf (make generate: SizeVT,
// MarshalToSizedBufferVT, UnmarshalVT), which encodes and decodes them without protobuf's reflection.
// Reflection is what maps cost most: every metadata and HTTP header map entry took a reflect.New and a
// reflect map insert to decode and a copied key to encode, about 50 allocations per HTTP request.
//
// Every message is encoded that way: the bytes are protobuf's (FuzzProtoFastPath checks it), but for
// proto3 strings that are not UTF-8, which protobuf refuses to encode and vtprotobuf writes as they are
// (an HTTP header value may rightly carry such bytes). Only messages that kas alone sends, to agents or
// to another kas, are decoded that way (FastDecoder): vtprotobuf's decoder is laxer than protobuf's (it
// does not check UTF-8, nor field number 0 inside a map entry), and what an agent sends to kas, a
// hostile peer may have written, so protobuf checks it.
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT(dAtA []byte) (int, error)
	UnmarshalVT(dAtA []byte) error
}

// FastDecoder is a message that only kas sends (to an agent, or to another kas, over the private API):
// ProtoUnmarshal decodes it with vtprotobuf's code.
type FastDecoder interface {
	vtMessage
	SentByKasOnly()
}

// ProtoSize is proto.Size.
func ProtoSize(m proto.Message) int {
	if v, ok := m.(vtMessage); ok {
		return v.SizeVT()
	}
	return proto.Size(m)
}

// ProtoMarshalAppend is proto.MarshalOptions{}.MarshalAppend.
func ProtoMarshalAppend(b []byte, m proto.Message) ([]byte, error) {
	return ProtoMarshalAppendSized(b, m, ProtoSize(m))
}

// ProtoMarshalAppendSized is ProtoMarshalAppend for a message whose ProtoSize was just taken (size):
// it is not computed again.
func ProtoMarshalAppendSized(b []byte, m proto.Message, size int) ([]byte, error) {
	v, ok := m.(vtMessage)
	if !ok {
		return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, m)
	}
	b = slices.Grow(b, size)
	n, err := v.MarshalToSizedBufferVT(b[len(b) : len(b)+size])
	if err != nil {
		return b, err
	}
	if n != size {
		return b, fmt.Errorf("encode %T: it changed while it was encoded", m)
	}
	return b[:len(b)+size], nil
}

// ProtoMarshalPooled encodes m, whose ProtoSize is size, into a buffer of PayloadPool (gRPC's pool)
// that holds exactly its bytes: whoever takes it puts it back (gRPC, once it wrote a mem.Buffer made of
// it). On an error the buffer is back in the pool already.
func ProtoMarshalPooled(m proto.Message, size int) (*[]byte, error) {
	buf := PayloadPool.Get(size)
	b, err := ProtoMarshalAppendSized((*buf)[:0], m, size)
	if err == nil && (len(b) != size || (size > 0 && &b[0] != &(*buf)[0])) {
		err = fmt.Errorf("encode %T: it changed while it was encoded", m)
	}
	if err != nil {
		PayloadPool.Put(buf)
		return nil, err
	}
	*buf = b
	return buf, nil
}

// ProtoMarshal is proto.Marshal.
func ProtoMarshal(m proto.Message) ([]byte, error) {
	return ProtoMarshalAppend(nil, m)
}

// ProtoUnmarshal is proto.Unmarshal: m is reset first, and keeps no reference to b. A FastDecoder is
// decoded without reflection.
func ProtoUnmarshal(b []byte, m proto.Message) error {
	v, ok := m.(FastDecoder)
	if !ok {
		return proto.Unmarshal(b, m)
	}
	proto.Reset(m)
	return v.UnmarshalVT(b)
}

// protoMarshalBuffers encodes m as gRPC's proto codec does: a large message into a buffer of gRPC's
// pool, which gRPC puts back once written.
func protoMarshalBuffers(m proto.Message) (mem.BufferSlice, error) {
	size := ProtoSize(m)
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := ProtoMarshalAppendSized(make([]byte, 0, size), m, size)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf, err := ProtoMarshalPooled(m, size)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, PayloadPool)}, nil
}

// protoUnmarshalBuffers decodes data into m as gRPC's proto codec does: the bytes are made contiguous in
// a buffer of gRPC's pool, freed once decoded (decoding copies what it keeps).
func protoUnmarshalBuffers(data mem.BufferSlice, m proto.Message) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return ProtoUnmarshal(buf.ReadOnlyData(), m)
}
