package rpc

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// chunked is b as gRPC hands it over: in several buffers, the first ending inside the envelope's head.
func chunked(b []byte) mem.BufferSlice {
	return mem.BufferSlice{mem.SliceBuffer(b[:3]), mem.SliceBuffer(b[3:1000]), mem.SliceBuffer(b[1000:])}
}

// A lone Message envelope with a large payload is received into a pooled buffer holding exactly the
// payload, for each of the three envelopes; the message is what protobuf decodes.
func TestLargeLonePayloadsArePooled(t *testing.T) {
	payload := bytes.Repeat([]byte("pooled!"), grpctool.LargeMin/7+1)
	msg := &Message{Data: payload}
	for _, c := range []struct {
		name string
		sent proto.Message
		recv func(mem.BufferSlice) (proto.Message, *[]byte, error)
	}{
		{"ConnectRequest", &ConnectRequest{Msg: &ConnectRequest_Message{Message: msg}}, func(d mem.BufferSlice) (proto.Message, *[]byte, error) {
			m, pooled, _, err := recvPooled(delivered(d), connectRequestMessageField, setRequestMessage)
			return m, pooled, err
		}},
		{"ConnectResponse", &ConnectResponse{Msg: &ConnectResponse_Message{Message: msg}}, func(d mem.BufferSlice) (proto.Message, *[]byte, error) {
			m, pooled, _, err := recvPooled(delivered(d), connectResponseMessageField, setResponseMessage)
			return m, pooled, err
		}},
		{"GatewayResponse", &GatewayResponse{Msg: &GatewayResponse_Message{Message: msg}}, func(d mem.BufferSlice) (proto.Message, *[]byte, error) {
			m, pooled, _, err := recvPooled(delivered(d), gatewayResponseMessageField, setGatewayMessage)
			return m, pooled, err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := proto.Marshal(c.sent)
			if err != nil {
				t.Fatal(err)
			}
			got, pooled, err := c.recv(chunked(b))
			if err != nil {
				t.Fatal(err)
			}
			if pooled == nil || !bytes.Equal(*pooled, payload) {
				t.Fatalf("pooled %v, want a buffer of exactly the payload", pooled != nil)
			}
			if !proto.Equal(got, c.sent) {
				t.Fatal("the received message is not the one sent")
			}
		})
	}
}

// Anything but a lone Message envelope is decoded as before, with no pooled buffer of its own: a small
// payload, a message with another field, a batch (whose messages' payloads come out pooled one by one,
// see TestBatchedPayloadsComeOutPooled), trailing bytes; what protobuf refuses is refused.
func TestOtherMessagesAreNotPooled(t *testing.T) {
	large := bytes.Repeat([]byte{7}, grpctool.LargeMin)
	withUnknown := &Message{Data: large}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1))
	for name, m := range map[string]*ConnectResponse{
		"small":         {Msg: &ConnectResponse_Message{Message: &Message{Data: []byte("small")}}},
		"another field": {Msg: &ConnectResponse_Message{Message: withUnknown}},
		"batch":         {Msg: &ConnectResponse_Batch{Batch: &ResponseBatch{Msgs: []*ConnectResponse{{Msg: &ConnectResponse_Message{Message: &Message{Data: large}}}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got, pooled, err := recvResponse(b)
			if err != nil {
				t.Fatal(err)
			}
			if pooled != nil || !proto.Equal(got, m) {
				t.Fatalf("pooled %v, equal %v: want the message decoded as before, nothing pooled", pooled != nil, proto.Equal(got, m))
			}
		})
	}
	b, err := proto.Marshal(&ConnectResponse{Msg: &ConnectResponse_Message{Message: &Message{Data: large}}})
	if err != nil {
		t.Fatal(err)
	}
	// A field this version does not know (number 99) after the envelope.
	if _, pooled, err := recvResponse(protowire.AppendVarint(protowire.AppendTag(b, 99, protowire.VarintType), 1)); err != nil || pooled != nil {
		t.Fatalf("trailing field: pooled %v, err %v; want it decoded by protobuf, nothing pooled", pooled != nil, err)
	}
	// A known field (2, a message) with the wrong wire type is refused, not kept as an unknown field.
	if _, pooled, err := recvResponse(append(b, 0x10, 0x01)); err == nil || pooled != nil {
		t.Fatalf("known field with the wrong wire type: pooled %v, err %v; want an error", pooled != nil, err)
	}
	if _, pooled, err := recvResponse(b[:len(b)-1]); err == nil || pooled != nil {
		t.Fatalf("truncated envelope: pooled %v, err %v; want protobuf's error", pooled != nil, err)
	}
}

// delivered is a stream whose next message is data, decoded as gRPC decodes with the raw codec.
type delivered mem.BufferSlice

func (d delivered) RecvMsg(m any) error { return grpctool.RawCodec{}.Unmarshal(mem.BufferSlice(d), m) }

func recvResponse(b []byte) (*ConnectResponse, *[]byte, error) {
	m, pooled, _, err := recvPooled(delivered{mem.SliceBuffer(b)}, connectResponseMessageField, setResponseMessage)
	return m, pooled, err
}
