package rpc

import (
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Most tunnel traffic is Message envelopes: one proxied gRPC message wrapped in ConnectRequest,
// ConnectResponse or GatewayResponse. Protobuf reflection copies the payload into the encoded envelope
// and copies it out again when decoding; for a 1 MiB message those copies cost more than the rest of the
// hop. The methods below encode an envelope as two buffers, a few bytes of tags and lengths and the
// payload itself, and decode one by slicing the payload out of the received bytes. The bytes on the
// wire are exactly what proto.Marshal writes; anything else takes the ordinary protobuf path.
// grpctool.RawCodec calls them.

// Field numbers of the message envelopes (see the .proto files).
const (
	connectRequestMessageField  protowire.Number = 3
	connectResponseMessageField protowire.Number = 2
	gatewayResponseMessageField protowire.Number = 4
	messageDataField            protowire.Number = 1
)

// MarshalBuffers encodes a Message envelope without copying its payload; ok is false for every other
// message.
func (m *ConnectRequest) MarshalBuffers() (bs mem.BufferSlice, ok bool) {
	if x, isMsg := m.GetMsg().(*ConnectRequest_Message); isMsg && len(m.unknownFields) == 0 {
		return envelopeBuffers(connectRequestMessageField, x.Message)
	}
	return nil, false
}

// UnmarshalOwned decodes b when it is exactly a Message envelope, keeping the payload as a slice of b;
// ok is false (and m untouched) otherwise. b must not change afterwards.
func (m *ConnectRequest) UnmarshalOwned(b []byte) (ok bool) {
	data, ok := parseEnvelope(b, connectRequestMessageField)
	if !ok {
		return false
	}
	m.Reset()
	m.Msg = &ConnectRequest_Message{Message: &Message{Data: data}}
	return true
}

// MarshalBuffers encodes a Message envelope without copying its payload; ok is false for every other
// message.
func (m *ConnectResponse) MarshalBuffers() (bs mem.BufferSlice, ok bool) {
	if x, isMsg := m.GetMsg().(*ConnectResponse_Message); isMsg && len(m.unknownFields) == 0 {
		return envelopeBuffers(connectResponseMessageField, x.Message)
	}
	return nil, false
}

// UnmarshalOwned decodes b when it is exactly a Message envelope, keeping the payload as a slice of b;
// ok is false (and m untouched) otherwise. b must not change afterwards.
func (m *ConnectResponse) UnmarshalOwned(b []byte) (ok bool) {
	data, ok := parseEnvelope(b, connectResponseMessageField)
	if !ok {
		return false
	}
	m.Reset()
	m.Msg = &ConnectResponse_Message{Message: &Message{Data: data}}
	return true
}

// MarshalBuffers encodes a Message envelope without copying its payload; ok is false for every other
// message.
func (m *GatewayResponse) MarshalBuffers() (bs mem.BufferSlice, ok bool) {
	if x, isMsg := m.GetMsg().(*GatewayResponse_Message); isMsg && len(m.unknownFields) == 0 {
		return envelopeBuffers(gatewayResponseMessageField, x.Message)
	}
	return nil, false
}

// UnmarshalOwned decodes b when it is exactly a Message envelope, keeping the payload as a slice of b;
// ok is false (and m untouched) otherwise. b must not change afterwards.
func (m *GatewayResponse) UnmarshalOwned(b []byte) (ok bool) {
	data, ok := parseEnvelope(b, gatewayResponseMessageField)
	if !ok {
		return false
	}
	m.Reset()
	m.Msg = &GatewayResponse_Message{Message: &Message{Data: data}}
	return true
}

// envelopeBuffers is proto.Marshal of an envelope whose field is msg: the outer tag and length, then
// (for a non-empty payload) the data tag and length, then the payload itself.
func envelopeBuffers(field protowire.Number, msg *Message) (mem.BufferSlice, bool) {
	if msg != nil && len(msg.unknownFields) != 0 {
		return nil, false
	}
	data := msg.GetData()
	inner := 0
	if len(data) > 0 {
		inner = protowire.SizeTag(messageDataField) + protowire.SizeBytes(len(data))
	}
	prefix := make([]byte, 0, protowire.SizeTag(field)+protowire.SizeVarint(uint64(inner))+protowire.SizeTag(messageDataField)+protowire.SizeVarint(uint64(len(data))))
	prefix = protowire.AppendTag(prefix, field, protowire.BytesType)
	prefix = protowire.AppendVarint(prefix, uint64(inner))
	if len(data) == 0 {
		return mem.BufferSlice{mem.SliceBuffer(prefix)}, true
	}
	prefix = protowire.AppendTag(prefix, messageDataField, protowire.BytesType)
	prefix = protowire.AppendVarint(prefix, uint64(len(data)))
	return mem.BufferSlice{mem.SliceBuffer(prefix), mem.SliceBuffer(data)}, true
}

// parseEnvelope returns the payload when b is exactly one field of number field holding a Message with
// at most its data field, each encoded once.
func parseEnvelope(b []byte, field protowire.Number) (data []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != field || typ != protowire.BytesType {
		return nil, false
	}
	inner, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil, false
	}
	if len(inner) == 0 {
		return nil, true
	}
	num, typ, n = protowire.ConsumeTag(inner)
	if n < 0 || num != messageDataField || typ != protowire.BytesType {
		return nil, false
	}
	data, m = protowire.ConsumeBytes(inner[n:])
	if m < 0 || n+m != len(inner) {
		return nil, false
	}
	// Cap the slice so that an append by its user can never write over bytes after it.
	return data[:len(data):len(data)], true
}
