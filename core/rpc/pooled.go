package rpc

import (
	"bytes"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// A large call payload received on a tunnel is copied once, out of gRPC's buffers (which gRPC frees as
// soon as the message is decoded), and then read once more: decoded by the service or the caller, or
// written to the next stream. Copied into a new slice, each such payload is a large allocation per call
// (zeroed, and soon garbage); copied into a buffer of grpctool.PayloadPool, it goes back to the pool once
// read, so that 1 MiB calls cost no new memory on the receiving side. A tunnel, batched or not, receives
// a lone Message envelope of grpctool.MediumMin bytes or more that way, and the payloads of a batch as
// described below; RecvRequestPooled and RecvResponsePooled hand each buffer to the reader, who passes it
// on with the payload (grpctool.RawFrame's Pooled) to whoever reads it last.

// pooledPayload copies the payload of data into a buffer of grpctool.PayloadPool when data is exactly a
// Message envelope in field (as parseEnvelope takes it) with a payload of grpctool.MediumMin bytes or more;
// nil otherwise, data untouched.
func pooledPayload(data mem.BufferSlice, field protowire.Number) *[]byte {
	total := data.Len()
	if total < grpctool.MediumMin {
		return nil
	}
	var head [maxEnvelopeHead]byte
	r := data.Reader()
	defer r.Close()
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil
	}
	off, hasData, ok := parseEnvelopeHead(head[:], field, total)
	n := total - off
	if !ok || !hasData || n < grpctool.MediumMin {
		return nil
	}
	buf := grpctool.PayloadPool.Get(n)
	copied := copy(*buf, head[off:])
	if _, err := io.ReadFull(r, (*buf)[copied:]); err != nil {
		grpctool.PayloadPool.Put(buf)
		return nil
	}
	return buf
}

// capped is b that an append can never write past (as parseEnvelope's payloads).
func capped(b []byte) []byte { return b[:len(b):len(b)] }

// A payload of medium size (grpctool.MediumMin up to grpctool.LargeMin) travels in batches, or alone, and
// was copied into a new slice at every receiving end like a small one: a few KiB of garbage per message
// at each end, which made a 4 KiB call through the tunnel cost twice a direct one at one caller (the
// collections it brought, and the fresh memory each new slice is, were on the call's path), where
// gRPC-go decodes out of its pooled buffers. Such a message is now decoded out of gRPC's buffer (or a
// pooled copy when it came in several, which goes back at once), and each payload it carries is copied
// into a buffer of grpctool.PayloadPool of its own, handed on with the payload as a large one is.

// received is a message of type M received with its payloads pooled: field is the envelope's Message
// field, setMessage puts a Message in the message's oneof.
type received[M any, PM interface {
	*M
	proto.Message
	grpctool.OwnedUnmarshaler
	ownPayloads() (lone *[]byte, entries []*[]byte)
}] struct {
	msg M // in the same allocation
	// pooled is the buffer of a lone Message's payload; entries[i] that of the batch's i-th message (nil:
	// none). Whoever takes a payload owns its buffer.
	pooled     *[]byte
	entries    []*[]byte
	field      protowire.Number
	setMessage func(PM, *Message)
}

// UnmarshalBuffers implements grpctool.BufferUnmarshaler.
func (r *received[M, PM]) UnmarshalBuffers(data mem.BufferSlice) error {
	if buf := pooledPayload(data, r.field); buf != nil {
		r.setMessage(&r.msg, &Message{Data: capped(*buf)})
		r.pooled = buf
		return nil
	}
	if data.Len() < grpctool.MediumMin {
		return grpctool.RawCodec{}.Unmarshal(data, PM(&r.msg))
	}
	// Decoded out of gRPC's buffer (a reference of ours) or a pooled copy of its buffers, either freed on
	// return: every payload that is a slice of it is copied out first, the rest protobuf copied already.
	tmp := data.MaterializeToBuffer(grpctool.PayloadPool)
	defer tmp.Free()
	b := tmp.ReadOnlyData()
	m := PM(&r.msg)
	if ok, err := m.UnmarshalOwned(b); !ok || err != nil {
		if err == nil {
			err = grpctool.ProtoUnmarshal(b, m)
		}
		return err
	}
	r.pooled, r.entries = m.ownPayloads()
	return nil
}

// ownPayload gives msg a payload of its own: in a buffer of grpctool.PayloadPool, returned, from
// grpctool.MediumMin bytes on; in a new slice below that.
func ownPayload(msg *Message) *[]byte {
	if msg == nil || len(msg.Data) == 0 {
		return nil
	}
	if len(msg.Data) < grpctool.MediumMin {
		msg.Data = bytes.Clone(msg.Data)
		return nil
	}
	buf := grpctool.PayloadPool.Get(len(msg.Data))
	copy(*buf, msg.Data)
	msg.Data = capped(*buf)
	return buf
}

// recvPooled receives the next message from s into a received[M]: pooled is a lone Message's buffer,
// entries those of a batch's messages (see received).
func recvPooled[M any, PM interface {
	*M
	proto.Message
	grpctool.OwnedUnmarshaler
	ownPayloads() (lone *[]byte, entries []*[]byte)
}](s interface{ RecvMsg(any) error }, field protowire.Number, setMessage func(PM, *Message)) (m PM, pooled *[]byte, entries []*[]byte, err error) {
	r := &received[M, PM]{field: field, setMessage: setMessage}
	if err := s.RecvMsg(r); err != nil {
		return nil, nil, nil, err
	}
	return &r.msg, r.pooled, r.entries, nil
}

// ownPayloads gives every payload m carries, as a lone Message or in its batch, a buffer of its own
// (see ownPayload): lone is the pooled buffer of m's own Message, entries[i] that of its batch's i-th
// message (nil when none has one).
func (m *ConnectRequest) ownPayloads() (lone *[]byte, entries []*[]byte) {
	return ownPayloads(m.GetMessage(), m.GetBatch().GetMsgs())
}

// ownPayloads is as ConnectRequest's.
func (m *ConnectResponse) ownPayloads() (lone *[]byte, entries []*[]byte) {
	return ownPayloads(m.GetMessage(), m.GetBatch().GetMsgs())
}

// ownPayloads is as ConnectRequest's.
func (m *GatewayResponse) ownPayloads() (lone *[]byte, entries []*[]byte) {
	return ownPayloads(m.GetMessage(), m.GetBatch().GetMsgs())
}

func ownPayloads[E interface{ GetMessage() *Message }](msg *Message, batch []E) (lone *[]byte, entries []*[]byte) {
	lone = ownPayload(msg)
	for i, e := range batch {
		if buf := ownPayload(e.GetMessage()); buf != nil {
			if entries == nil {
				entries = make([]*[]byte, len(batch))
			}
			entries[i] = buf
		}
	}
	return lone, entries
}

func setRequestMessage(m *ConnectRequest, msg *Message) {
	m.Msg = &ConnectRequest_Message{Message: msg}
}
func setResponseMessage(m *ConnectResponse, msg *Message) {
	m.Msg = &ConnectResponse_Message{Message: msg}
}
func setGatewayMessage(m *GatewayResponse, msg *Message) {
	m.Msg = &GatewayResponse_Message{Message: msg}
}

// RecvGatewayPooled receives the next message of a gateway stream (a client stream with the raw codec),
// with a lone payload of grpctool.MediumMin bytes or more pooled: pooled, when set, is the buffer the
// Message's data is, and the caller owns it.
func RecvGatewayPooled(gw grpc.ClientStream) (m *GatewayResponse, pooled *[]byte, err error) {
	m, pooled, _, err = recvPooled(gw, gatewayResponseMessageField, setGatewayMessage)
	return m, pooled, err
}

// recvPooledRequest is the generated Recv of s, with payloads pooled (see received) when s is gRPC's own stream
// (whose Recv is RecvMsg into a new ConnectRequest); any other stream's Recv is left as it is.
func recvPooledRequest(s ReverseTunnel_ConnectServer) (*ConnectRequest, *[]byte, []*[]byte, error) {
	if _, ok := s.(*grpc.GenericServerStream[ConnectRequest, ConnectResponse]); !ok {
		m, err := s.Recv()
		return m, nil, nil, err
	}
	return recvPooled(s, connectRequestMessageField, setRequestMessage)
}

// recvPooledResponse is recvPooledRequest for the agent's end.
func recvPooledResponse(c ReverseTunnel_ConnectClient) (*ConnectResponse, *[]byte, []*[]byte, error) {
	if _, ok := c.(*grpc.GenericClientStream[ConnectRequest, ConnectResponse]); !ok {
		m, err := c.Recv()
		return m, nil, nil, err
	}
	return recvPooled(c, connectResponseMessageField, setResponseMessage)
}

// PooledRequestReceiver is kas's end of a tunnel that may hand over a payload in a buffer of
// grpctool.PayloadPool: pooled, when set, is the buffer the returned Message's data is, and the caller
// owns it.
type PooledRequestReceiver interface {
	RecvPooled() (m *ConnectRequest, pooled *[]byte, err error)
}

// PooledResponseReceiver is PooledRequestReceiver for the agent's end.
type PooledResponseReceiver interface {
	RecvPooled() (m *ConnectResponse, pooled *[]byte, err error)
}

// RecvRequestPooled receives from s, pooled when s can: a batched stream, or gRPC's own.
func RecvRequestPooled(s ReverseTunnel_ConnectServer) (*ConnectRequest, *[]byte, error) {
	if p, ok := s.(PooledRequestReceiver); ok {
		return p.RecvPooled()
	}
	m, pooled, _, err := recvPooledRequest(s)
	return m, pooled, err
}

// RecvResponsePooled receives from c, pooled when c can: a batched stream, or gRPC's own.
func RecvResponsePooled(c ReverseTunnel_ConnectClient) (*ConnectResponse, *[]byte, error) {
	if p, ok := c.(PooledResponseReceiver); ok {
		return p.RecvPooled()
	}
	m, pooled, _, err := recvPooledResponse(c)
	return m, pooled, err
}
