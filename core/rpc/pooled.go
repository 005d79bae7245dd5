package rpc

import (
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
// a lone Message envelope of grpctool.PooledMin bytes or more that way; RecvRequestPooled and
// RecvResponsePooled hand its buffer to the reader, who passes it on with the payload
// (grpctool.RawFrame's Pooled) to whoever reads it last.

// pooledPayload copies the payload of data into a buffer of grpctool.PayloadPool when data is exactly a
// Message envelope in field (as parseEnvelope takes it) with a payload of grpctool.PooledMin bytes or
// more; nil otherwise, data untouched.
func pooledPayload(data mem.BufferSlice, field protowire.Number) *[]byte {
	total := data.Len()
	if total < grpctool.PooledMin {
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
	if !ok || !hasData || n < grpctool.PooledMin {
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

// received is a message of type M received with a large lone payload pooled: field is the envelope's
// Message field, setMessage puts a Message in the message's oneof.
type received[M any, PM interface {
	*M
	proto.Message
}] struct {
	msg        M // in the same allocation
	pooled     *[]byte
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
	return grpctool.RawCodec{}.Unmarshal(data, PM(&r.msg))
}

// recvPooled receives the next message from s into a received[M].
func recvPooled[M any, PM interface {
	*M
	proto.Message
}](s interface{ RecvMsg(any) error }, field protowire.Number, setMessage func(PM, *Message)) (PM, *[]byte, error) {
	r := &received[M, PM]{field: field, setMessage: setMessage}
	if err := s.RecvMsg(r); err != nil {
		return nil, nil, err
	}
	return &r.msg, r.pooled, nil
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
// with a large lone payload pooled: pooled, when set, is the buffer the Message's data is, and the
// caller owns it.
func RecvGatewayPooled(gw grpc.ClientStream) (m *GatewayResponse, pooled *[]byte, err error) {
	return recvPooled(gw, gatewayResponseMessageField, setGatewayMessage)
}

// recvPooledRequest is the generated Recv of s, with a large payload pooled when s is gRPC's own stream
// (whose Recv is RecvMsg into a new ConnectRequest); any other stream's Recv is left as it is.
func recvPooledRequest(s ReverseTunnel_ConnectServer) (*ConnectRequest, *[]byte, error) {
	if _, ok := s.(*grpc.GenericServerStream[ConnectRequest, ConnectResponse]); !ok {
		m, err := s.Recv()
		return m, nil, err
	}
	return recvPooled(s, connectRequestMessageField, setRequestMessage)
}

// recvPooledResponse is recvPooledRequest for the agent's end.
func recvPooledResponse(c ReverseTunnel_ConnectClient) (*ConnectResponse, *[]byte, error) {
	if _, ok := c.(*grpc.GenericClientStream[ConnectRequest, ConnectResponse]); !ok {
		m, err := c.Recv()
		return m, nil, err
	}
	return recvPooled(c, connectResponseMessageField, setResponseMessage)
}

// PooledRequestReceiver is kas's end of a tunnel that may hand over a large payload in a buffer of
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
	return recvPooledRequest(s)
}

// RecvResponsePooled receives from c, pooled when c can: a batched stream, or gRPC's own.
func RecvResponsePooled(c ReverseTunnel_ConnectClient) (*ConnectResponse, *[]byte, error) {
	if p, ok := c.(PooledResponseReceiver); ok {
		return p.RecvPooled()
	}
	return recvPooledResponse(c)
}
