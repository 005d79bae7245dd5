package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
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
	connectRequestMessageField    protowire.Number = 3
	connectResponseMessageField   protowire.Number = 2
	gatewayResponseMessageField   protowire.Number = 4
	messageDataField              protowire.Number = 1
	connectRequestBatchField      protowire.Number = 7
	connectRequestDescriptorField protowire.Number = 1
	connectResponseBatchField     protowire.Number = 5
	gatewayResponseNoTunnelField  protowire.Number = 2
	gatewayResponseBatchField     protowire.Number = 7
	batchMsgsField                protowire.Number = 1
)

// MarshalBuffers encodes a Message envelope without copying its payload; ok is false for every other
// message.
func (m *ConnectRequest) MarshalBuffers() (bs mem.BufferSlice, ok bool) {
	if len(m.unknownFields) != 0 {
		return nil, false
	}
	switch x := m.GetMsg().(type) {
	case *ConnectRequest_Message:
		return envelopeBuffers(connectRequestMessageField, x.Message)
	case *ConnectRequest_Batch:
		if len(x.Batch.unknownFields) == 0 {
			return batchBuffers(connectRequestBatchField, x.Batch.GetMsgs())
		}
	}
	return nil, false
}

// UnmarshalOwned decodes b when it is exactly a Message envelope, keeping the payload as a slice of b,
// or a batch (see parseBatch), which it decodes or refuses; ok is false (and m untouched) for anything
// else. b must not change afterwards.
func (m *ConnectRequest) UnmarshalOwned(b []byte) (ok bool, err error) {
	if !hasField(b, connectRequestBatchField) {
		return m.unmarshalMessage(b), nil
	}
	msgs, err := parseBatch(b, connectRequestBatchField, newConnectRequest, errBatchNesting, connectRequestBatchField, connectRequestDescriptorField)
	if err != nil {
		return false, err
	}
	m.Reset()
	m.Msg = &ConnectRequest_Batch{Batch: &RequestBatch{Msgs: msgs}}
	return true, nil
}

// unmarshalMessage is UnmarshalOwned for a Message envelope only.
func (m *ConnectRequest) unmarshalMessage(b []byte) (ok bool) {
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
	if len(m.unknownFields) != 0 {
		return nil, false
	}
	switch x := m.GetMsg().(type) {
	case *ConnectResponse_Message:
		return envelopeBuffers(connectResponseMessageField, x.Message)
	case *ConnectResponse_Batch:
		if len(x.Batch.unknownFields) == 0 {
			return batchBuffers(connectResponseBatchField, x.Batch.GetMsgs())
		}
	}
	return nil, false
}

// UnmarshalOwned decodes b when it is exactly a Message envelope, keeping the payload as a slice of b,
// or a batch (see parseBatch), which it decodes or refuses; ok is false (and m untouched) for anything
// else. b must not change afterwards.
func (m *ConnectResponse) UnmarshalOwned(b []byte) (ok bool, err error) {
	if !hasField(b, connectResponseBatchField) {
		return m.unmarshalMessage(b), nil
	}
	msgs, err := parseBatch(b, connectResponseBatchField, newConnectResponse, errBatchNesting, connectResponseBatchField)
	if err != nil {
		return false, err
	}
	m.Reset()
	m.Msg = &ConnectResponse_Batch{Batch: &ResponseBatch{Msgs: msgs}}
	return true, nil
}

// unmarshalMessage is UnmarshalOwned for a Message envelope only.
func (m *ConnectResponse) unmarshalMessage(b []byte) (ok bool) {
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
	if len(m.unknownFields) != 0 {
		return nil, false
	}
	switch x := m.GetMsg().(type) {
	case *GatewayResponse_Message:
		return envelopeBuffers(gatewayResponseMessageField, x.Message)
	case *GatewayResponse_Batch:
		if len(x.Batch.unknownFields) == 0 {
			return batchBuffers(gatewayResponseBatchField, x.Batch.GetMsgs())
		}
	}
	return nil, false
}

// UnmarshalOwned decodes b when it is exactly a Message envelope, keeping the payload as a slice of b,
// or a batch (see parseBatch), which it decodes or refuses; ok is false (and m untouched) for anything
// else. b must not change afterwards.
func (m *GatewayResponse) UnmarshalOwned(b []byte) (ok bool, err error) {
	if !hasField(b, gatewayResponseBatchField) {
		return m.unmarshalMessage(b), nil
	}
	msgs, err := parseBatch(b, gatewayResponseBatchField, newGatewayResponse, errGatewayBatchNesting, gatewayResponseBatchField, gatewayResponseNoTunnelField)
	if err != nil {
		return false, err
	}
	m.Reset()
	m.Msg = &GatewayResponse_Batch{Batch: &GatewayBatch{Msgs: msgs}}
	return true, nil
}

// unmarshalMessage is UnmarshalOwned for a Message envelope only.
func (m *GatewayResponse) unmarshalMessage(b []byte) (ok bool) {
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
	prefix := envelopePrefix(field, len(data))
	if len(data) == 0 {
		return mem.BufferSlice{mem.SliceBuffer(prefix)}, true
	}
	return mem.BufferSlice{mem.SliceBuffer(prefix), mem.SliceBuffer(data)}, true
}

// parseEnvelope returns the payload when b is exactly one field of number field holding a Message with
// at most its data field, each encoded once.
func parseEnvelope(b []byte, field protowire.Number) (data []byte, ok bool) {
	off, hasData, ok := parseEnvelopeHead(b[:min(len(b), maxEnvelopeHead)], field, len(b))
	if !ok || !hasData {
		return nil, ok
	}
	// Cap the slice so that an append by its user can never write over bytes after it.
	return b[off:len(b):len(b)], true
}

// maxEnvelopeHead bounds what precedes the payload in a Message envelope: two tags and two varints
// (protobuf accepts padded varints, so each may take 10 bytes).
const maxEnvelopeHead = 2 * (1 + binary.MaxVarintLen64)

// parseEnvelopeHead reads the start (head) of an encoding of total bytes that parseEnvelope takes: the
// payload starts at off and runs to the end; hasData is false for a Message without its data field.
func parseEnvelopeHead(head []byte, field protowire.Number, total int) (off int, hasData, ok bool) {
	num, typ, k := protowire.ConsumeTag(head)
	if k < 0 || num != field || typ != protowire.BytesType {
		return 0, false, false
	}
	inner, m := protowire.ConsumeVarint(head[k:])
	if m < 0 || uint64(total-k-m) != inner {
		return 0, false, false
	}
	off = k + m
	if inner == 0 {
		return off, false, true
	}
	num, typ, k = protowire.ConsumeTag(head[off:])
	if k < 0 || num != messageDataField || typ != protowire.BytesType {
		return 0, false, false
	}
	size, m := protowire.ConsumeVarint(head[off+k:])
	if m < 0 || uint64(total-off-k-m) != size {
		return 0, false, false
	}
	return off + k + m, true, true
}

// Batches (RequestBatch, ResponseBatch) go through protobuf's reflection for a repeated message inside a
// oneof, which cost more per call than the messages they save; they are encoded and decoded here
// instead, as the same bytes: the outer tag and length, then each message as a msgs entry.

// batchBuffers is proto.Marshal of an envelope whose field is a batch of msgs, in one buffer but for
// payloads over batchInlineMax, which keep buffers of their own (a sender batches none that large).
func batchBuffers[M batchable](field protowire.Number, msgs []M) (mem.BufferSlice, bool) {
	return batchBuffersWith(field, msgs, nil)
}

// batchBuffersWith is batchBuffers for a batch whose i-th message's payload is all of bufs[i] when that
// is set (bufs may be shorter than msgs, or nil): the encoding takes over a reference to each, freed once
// the payload is copied into the batch's buffer, or handed on with the payload to whoever frees the
// encoding (gRPC, once written).
func batchBuffersWith[M batchable](field protowire.Number, msgs []M, bufs []mem.Buffer) (mem.BufferSlice, bool) {
	sizes := make([]int, len(msgs))
	total, inline := 0, 0
	for i, m := range msgs {
		if data, f, ok := m.envelopeData(); ok {
			sizes[i] = envelopeSize(f, len(data))
			if len(data) > batchInlineMax {
				inline -= len(data)
			}
		} else {
			sizes[i] = grpctool.ProtoSize(m)
		}
		total += protowire.SizeTag(batchMsgsField) + protowire.SizeBytes(sizes[i])
	}
	head := make([]byte, 0, protowire.SizeTag(field)+protowire.SizeVarint(uint64(total))+total+inline)
	head = protowire.AppendTag(head, field, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(total))
	var out mem.BufferSlice
	var copied []mem.Buffer // freed once the batch is encoded
	for i, m := range msgs {
		head = protowire.AppendTag(head, batchMsgsField, protowire.BytesType)
		head = protowire.AppendVarint(head, uint64(sizes[i]))
		data, f, ok := m.envelopeData()
		if !ok {
			var err error
			if head, err = grpctool.ProtoMarshalAppendSized(head, m, sizes[i]); err != nil {
				return nil, false
			}
			continue
		}
		var buf mem.Buffer
		if i < len(bufs) {
			buf = bufs[i]
		}
		head = appendEnvelopePrefix(head, f, len(data))
		if len(data) <= batchInlineMax {
			head = append(head, data...)
			if buf != nil {
				copied = append(copied, buf)
			}
			continue
		}
		var payload mem.Buffer = mem.SliceBuffer(data)
		if buf != nil {
			payload = buf
		}
		out = append(out, mem.SliceBuffer(head), payload)
		head = head[len(head):] // the rest of the buffer, for what follows
	}
	if len(head) > 0 || len(out) == 0 {
		out = append(out, mem.SliceBuffer(head))
	}
	for _, b := range copied {
		b.Free()
	}
	return out, true
}

// batchInlineMax: a batched payload up to this size is copied into the batch's buffer.
const batchInlineMax = 1024

// batchable is an envelope type that batches hold.
type batchable interface {
	proto.Message
	// envelopeData is the payload and field number when the message is a plain Message envelope.
	envelopeData() (data []byte, field protowire.Number, ok bool)
}

func (m *ConnectRequest) envelopeData() ([]byte, protowire.Number, bool) {
	if x, ok := m.GetMsg().(*ConnectRequest_Message); ok && len(m.unknownFields) == 0 && len(x.Message.unknownFields) == 0 {
		return x.Message.GetData(), connectRequestMessageField, true
	}
	return nil, 0, false
}

func (m *ConnectResponse) envelopeData() ([]byte, protowire.Number, bool) {
	if x, ok := m.GetMsg().(*ConnectResponse_Message); ok && len(m.unknownFields) == 0 && len(x.Message.unknownFields) == 0 {
		return x.Message.GetData(), connectResponseMessageField, true
	}
	return nil, 0, false
}

func (m *GatewayResponse) envelopeData() ([]byte, protowire.Number, bool) {
	if x, ok := m.GetMsg().(*GatewayResponse_Message); ok && len(m.unknownFields) == 0 && len(x.Message.unknownFields) == 0 {
		return x.Message.GetData(), gatewayResponseMessageField, true
	}
	return nil, 0, false
}

// envelopeSize is the encoded size of a Message envelope in field f with n bytes of payload.
func envelopeSize(f protowire.Number, n int) int {
	inner := 0
	if n > 0 {
		inner = protowire.SizeTag(messageDataField) + protowire.SizeBytes(n)
	}
	return protowire.SizeTag(f) + protowire.SizeBytes(inner)
}

// envelopePrefix is what comes before n bytes of payload in a Message envelope in field f, in a slice of
// its own: the head of a message whose payload is written from a buffer of its own.
func envelopePrefix(f protowire.Number, n int) []byte {
	return appendEnvelopePrefix(make([]byte, 0, envelopeSize(f, n)-n), f, n)
}

// appendEnvelopePrefix appends what comes before the payload in a Message envelope (see envelopeBuffers).
func appendEnvelopePrefix(b []byte, f protowire.Number, n int) []byte {
	inner := 0
	if n > 0 {
		inner = protowire.SizeTag(messageDataField) + protowire.SizeBytes(n)
	}
	b = protowire.AppendTag(b, f, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(inner))
	if n == 0 {
		return b
	}
	b = protowire.AppendTag(b, messageDataField, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

// MaxBatchMessages bounds the messages of one batch: a sender sends at most a handful (a call's whole
// answer, or a call's start behind the last call's end), and a decoder that took any number would let a
// peer turn one message of a few MiB into millions of decoded ones.
const MaxBatchMessages = 64

var (
	errBatchForm    = errors.New("tunnel batch: not one batch field holding only messages")
	errBatchNesting = errors.New("tunnel batch: a batch or a descriptor inside a batch")
	// errGatewayBatchNesting is errBatchNesting for a gateway stream's batch.
	errGatewayBatchNesting = errors.New("gateway batch: a batch or no_tunnel inside a batch")
	errBatchSize           = fmt.Errorf("tunnel batch: more than %d messages", MaxBatchMessages)
)

// hasField reports whether b, an encoded message, has a top-level field of number field. It decodes
// nothing: a malformed b has none (protobuf then says what is wrong with it).
func hasField(b []byte, field protowire.Number) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		if num == field {
			return true
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return false
		}
		b = b[n+m:]
	}
	return false
}

func newConnectRequest() *ConnectRequest   { return &ConnectRequest{} }
func newConnectResponse() *ConnectResponse { return &ConnectResponse{} }
func newGatewayResponse() *GatewayResponse { return &GatewayResponse{} }

// batchEntry is an envelope type as a batch holds it.
type batchEntry interface {
	proto.Message
	unmarshalMessage(b []byte) (ok bool)
}

// parseBatch decodes b, which must be exactly one field of number field holding a batch of at most
// MaxBatchMessages entries, none of which has a top-level field in refused (a batch, a descriptor). A
// batch in any other form is refused rather than left to protobuf, which would decode any number of
// entries; an entry is checked before it is decoded, and one with a refused field is refused with nested.
func parseBatch[M batchEntry](b []byte, field protowire.Number, newMsg func() M, nested error, refused ...protowire.Number) ([]M, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != field || typ != protowire.BytesType {
		return nil, errBatchForm
	}
	batch, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil, errBatchForm
	}
	var msgs []M
	for len(batch) > 0 {
		num, typ, n := protowire.ConsumeTag(batch)
		if n < 0 || num != batchMsgsField || typ != protowire.BytesType {
			return nil, errBatchForm
		}
		e, m := protowire.ConsumeBytes(batch[n:])
		if m < 0 {
			return nil, errBatchForm
		}
		if len(msgs) == MaxBatchMessages {
			return nil, errBatchSize
		}
		for _, f := range refused {
			if hasField(e, f) {
				return nil, nested
			}
		}
		e = e[:len(e):len(e)]
		msg := newMsg()
		if !msg.unmarshalMessage(e) {
			if err := grpctool.ProtoUnmarshal(e, msg); err != nil {
				return nil, err
			}
		}
		msgs = append(msgs, msg)
		batch = batch[n+m:]
	}
	return msgs, nil
}

// PooledMessage is an agent's message of a call (what a ConnectRequest with a Message carries) whose data
// is a buffer of Pool: encoded with the raw codec (grpctool.BufferMarshaler), the buffer goes to gRPC,
// which puts it back in Pool once it is written, so that an answer costs no new memory per call.
// The sender must not touch the buffer after the send. On the wire it is that ConnectRequest.
type PooledMessage struct {
	Data *[]byte
	Pool mem.BufferPool
}

// MarshalBuffers implements grpctool.BufferMarshaler.
func (m *PooledMessage) MarshalBuffers() (bs mem.BufferSlice, ok bool) {
	return pooledEnvelope(connectRequestMessageField, m.Data, m.Pool), true
}

// PooledGatewayMessage is PooledMessage for a gateway stream: on the wire, a GatewayResponse with a
// Message.
type PooledGatewayMessage PooledMessage

// MarshalBuffers implements grpctool.BufferMarshaler.
func (m *PooledGatewayMessage) MarshalBuffers() (bs mem.BufferSlice, ok bool) {
	return pooledEnvelope(gatewayResponseMessageField, m.Data, m.Pool), true
}

// pooledEnvelope is a Message envelope in field around data, which goes back to pool once freed.
func pooledEnvelope(field protowire.Number, data *[]byte, pool mem.BufferPool) mem.BufferSlice {
	return mem.BufferSlice{mem.SliceBuffer(envelopePrefix(field, len(*data))), mem.NewBuffer(data, pool)}
}

// SharedResponseMessage is kas's message of a call (what a ConnectResponse with a Message carries) whose
// data is a buffer others hold references to as well (a request kas keeps to replay, see
// request.Frame): encoded with the raw codec, it takes a reference of its own, which gRPC frees once
// the message is written. On the wire it is that ConnectResponse.
type SharedResponseMessage struct {
	Buf mem.Buffer
}

// MarshalBuffers implements grpctool.BufferMarshaler.
func (m *SharedResponseMessage) MarshalBuffers() (bs mem.BufferSlice, ok bool) {
	n := m.Buf.Len()
	prefix := envelopePrefix(connectResponseMessageField, n)
	if n == 0 {
		return mem.BufferSlice{mem.SliceBuffer(prefix)}, true
	}
	m.Buf.Ref()
	return mem.BufferSlice{mem.SliceBuffer(prefix), m.Buf}, true
}

// SharedResponseBatch is a ResponseBatch some of whose messages' payloads are shared buffers (Bufs[i]
// for the i-th message, nil for the others; see SharedResponseMessage), each with one reference that
// the encoding takes over: freed once copied into the batch's buffer, or by gRPC once written. On the
// wire it is that ResponseBatch.
type SharedResponseBatch struct {
	Msgs []*ConnectResponse
	Bufs []mem.Buffer
}

// MarshalBuffers implements grpctool.BufferMarshaler.
func (b *SharedResponseBatch) MarshalBuffers() (mem.BufferSlice, bool) {
	return batchBuffersWith(connectResponseBatchField, b.Msgs, b.Bufs)
}

// PooledSender is a sender of an agent's call messages that can send a PooledMessage.
type PooledSender interface {
	SendPooled(m *PooledMessage) error
}

// SendPooledOn sends m on s: as itself when s can send any message (a gRPC stream), otherwise as the
// ConnectRequest it stands for, whose buffer is then left to the garbage collector.
func SendPooledOn(s interface{ Send(*ConnectRequest) error }, m *PooledMessage) error {
	switch x := s.(type) {
	case PooledSender:
		return x.SendPooled(m)
	case interface{ SendMsg(any) error }:
		return x.SendMsg(m)
	}
	return s.Send(&ConnectRequest{Msg: &ConnectRequest_Message{Message: &Message{Data: *m.Data}}})
}
