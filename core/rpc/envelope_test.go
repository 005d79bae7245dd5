package rpc

import (
	"bytes"
	"slices"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/grpctool/codectest"
	"github.com/tunnelbench/tunnelbench/core/grpctool/pooltest"
)

type envelope interface {
	proto.Message
	MarshalBuffers() (mem.BufferSlice, bool)
	UnmarshalOwned([]byte) (bool, error)
}

// envelopes are messages of every envelope type: Message envelopes of many sizes (the fast path) and
// others (the protobuf path).
func envelopes() []envelope {
	var out []envelope
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1 << 20} {
		data := bytes.Repeat([]byte{0xa5}, n)
		out = append(out,
			&ConnectRequest{Msg: &ConnectRequest_Message{Message: &Message{Data: data}}},
			&ConnectResponse{Msg: &ConnectResponse_Message{Message: &Message{Data: data}}},
			&GatewayResponse{Msg: &GatewayResponse_Message{Message: &Message{Data: data}}},
		)
	}
	small := []byte("hello")
	big := bytes.Repeat([]byte{0x5a}, 1<<20)
	hdr := &ConnectRequest{Msg: &ConnectRequest_Header{Header: &Header{Meta: MetaToValues(map[string][]string{"k": {"v"}})}}}
	reqMsg := func(d []byte) *ConnectRequest {
		return &ConnectRequest{Msg: &ConnectRequest_Message{Message: &Message{Data: d}}}
	}
	respMsg := func(d []byte) *ConnectResponse {
		return &ConnectResponse{Msg: &ConnectResponse_Message{Message: &Message{Data: d}}}
	}
	info := &ConnectResponse{Msg: &ConnectResponse_RequestInfo{RequestInfo: &RequestInfo{MethodName: "/s/m"}}}
	out = append(out,
		&ConnectRequest{Msg: &ConnectRequest_Batch{Batch: &RequestBatch{}}},
		&ConnectRequest{Msg: &ConnectRequest_Batch{Batch: &RequestBatch{Msgs: []*ConnectRequest{hdr, reqMsg(small), reqMsg(nil),
			{Msg: &ConnectRequest_Trailer{Trailer: &Trailer{}}}, {Msg: &ConnectRequest_CallEnd{CallEnd: &CallEnd{}}}}}}},
		&ConnectRequest{Msg: &ConnectRequest_Batch{Batch: &RequestBatch{Msgs: []*ConnectRequest{reqMsg(big), hdr, {}}}}},
		&ConnectResponse{Msg: &ConnectResponse_Batch{Batch: &ResponseBatch{Msgs: []*ConnectResponse{
			{Msg: &ConnectResponse_CallEnd{CallEnd: &CallEnd{}}}, info, respMsg(small), {Msg: &ConnectResponse_CloseSend{CloseSend: &CloseSend{}}}}}}},
		&ConnectResponse{Msg: &ConnectResponse_Batch{Batch: &ResponseBatch{Msgs: []*ConnectResponse{respMsg(big), respMsg(small)}}}},
		&GatewayResponse{Msg: &GatewayResponse_Batch{Batch: &GatewayBatch{Msgs: []*GatewayResponse{
			{Msg: &GatewayResponse_TunnelReady_{TunnelReady: &GatewayResponse_TunnelReady{}}},
			{Msg: &GatewayResponse_Header{Header: &Header{Meta: MetaToValues(map[string][]string{"k": {"v"}})}}},
			{Msg: &GatewayResponse_Message{Message: &Message{Data: small}}},
			{Msg: &GatewayResponse_Trailer{Trailer: &Trailer{}}}}}}},
		&GatewayResponse{Msg: &GatewayResponse_Batch{Batch: &GatewayBatch{Msgs: []*GatewayResponse{
			{Msg: &GatewayResponse_Message{Message: &Message{Data: big}}}, {}}}}},
	)
	return append(out,
		&ConnectRequest{Msg: &ConnectRequest_Message{}},
		&ConnectRequest{Msg: &ConnectRequest_Header{Header: &Header{Meta: MetaToValues(map[string][]string{"k": {"v"}})}}},
		&ConnectRequest{},
		&ConnectResponse{Msg: &ConnectResponse_RequestInfo{RequestInfo: &RequestInfo{MethodName: "/s/m", Deadline: timestamppb.Now()}}},
		&ConnectResponse{Msg: &ConnectResponse_CloseSend{CloseSend: &CloseSend{}}},
		&GatewayResponse{Msg: &GatewayResponse_TunnelReady_{TunnelReady: &GatewayResponse_TunnelReady{}}},
	)
}

func TestEnvelopeFastPathWritesWhatProtobufWrites(t *testing.T) {
	for _, m := range envelopes() {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		bs, ok := m.MarshalBuffers()
		isMsg := isMessageEnvelope(m)
		if ok != isMsg {
			t.Errorf("%T %v: fast path %v, want %v", m, short(m), ok, isMsg)
			continue
		}
		if ok && !bytes.Equal(bs.Materialize(), want) {
			t.Errorf("%T %v: fast path wrote % x..., protobuf % x...", m, short(m), head(bs.Materialize()), head(want))
		}
		got := m.ProtoReflect().New().Interface().(envelope)
		if ok, err := got.UnmarshalOwned(want); ok != isMsg || err != nil {
			t.Errorf("%T %v: fast decode disagrees with the fast encode", m, short(m))
			continue
		}
		if isMsg && !proto.Equal(got, m) {
			t.Errorf("%T %v: decoded %v", m, short(m), short(got))
		}
	}
}

// isMessageEnvelope: m takes the fast path, as a Message envelope or a batch.
func isMessageEnvelope(m proto.Message) bool {
	switch x := m.(type) {
	case *ConnectRequest:
		switch x.GetMsg().(type) {
		case *ConnectRequest_Message, *ConnectRequest_Batch:
			return true
		}
		return false
	case *ConnectResponse:
		switch x.GetMsg().(type) {
		case *ConnectResponse_Message, *ConnectResponse_Batch:
			return true
		}
		return false
	case *GatewayResponse:
		switch x.GetMsg().(type) {
		case *GatewayResponse_Message, *GatewayResponse_Batch:
			return true
		}
		return false
	}
	return false
}

func short(m proto.Message) string {
	s := m.(interface{ String() string }).String()
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func head(b []byte) []byte {
	return b[:min(len(b), 8)]
}

// FuzzEnvelopeDecode: whatever bytes arrive, the fast decode either declines or agrees with protobuf.
func FuzzEnvelopeDecode(f *testing.F) {
	for _, m := range envelopes() {
		if b, err := proto.Marshal(m); err == nil && len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Add([]byte{0x1a, 0x03, 0x0a, 0x01, 0x00, 0x1a, 0x00}) // the field twice: protobuf merges
	f.Add([]byte{0x1a, 0x02, 0x12, 0x00})                   // an unknown inner field
	f.Add([]byte{0x3a, 0x04, 0x0a, 0x02, 0x1a, 0x00})       // a batch of one empty Message
	f.Add([]byte{0x3a, 0x02, 0x0a, 0x00, 0x3a, 0x00})       // the batch field twice: protobuf merges
	f.Add([]byte{0x2a, 0x04, 0x0a, 0x02, 0x22, 0x00})       // a response batch of one call_end
	f.Add([]byte{0x3a, 0x04, 0x0a, 0x02, 0x0a, 0x00})       // a gateway batch of one tunnel_ready
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []envelope{&ConnectRequest{}, &ConnectResponse{}, &GatewayResponse{}} {
			fast := m.ProtoReflect().New().Interface().(envelope)
			if ok, err := fast.UnmarshalOwned(bytes.Clone(b)); !ok || err != nil {
				continue // declined (protobuf decodes it), or refused: stricter than protobuf is allowed
			}
			// The reference is the message's own decoder: protobuf's, or for what only kas sends
			// vtprotobuf's, which may accept what protobuf refuses (FuzzProtoFastPath compares those two).
			slow := m.ProtoReflect().New().Interface()
			if err := grpctool.ProtoUnmarshal(b, slow); err != nil {
				t.Fatalf("%T: fast decode accepted % x, the message's decoder refuses it: %v", m, b, err)
			}
			if !proto.Equal(fast, slow) {
				t.Fatalf("%T: % x decodes to %v fast, %v by the message's decoder", m, b, fast, slow)
			}
		}
	})
}

// A batch that protobuf would decode into far more than it takes is refused: more than MaxBatchMessages
// entries, a batch or a descriptor inside one, or a batch in any other form than one field of entries.
func TestBatchDecodeRefusesWhatCouldAmplify(t *testing.T) {
	hdr := &ConnectRequest{Msg: &ConnectRequest_Header{Header: &Header{}}}
	batchOf := func(msgs ...*ConnectRequest) *ConnectRequest {
		return &ConnectRequest{Msg: &ConnectRequest_Batch{Batch: &RequestBatch{Msgs: msgs}}}
	}
	many := make([]*ConnectRequest, MaxBatchMessages+1)
	for i := range many {
		many[i] = &ConnectRequest{}
	}
	desc := &ConnectRequest{Msg: &ConnectRequest_Descriptor_{Descriptor_: &Descriptor{}}}
	enc := func(m *ConnectRequest) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	twice := append(enc(batchOf(hdr)), enc(batchOf(hdr))...)
	for name, b := range map[string][]byte{
		"too many":              enc(batchOf(many...)),
		"batch in a batch":      enc(batchOf(batchOf(hdr))),
		"descriptor in a batch": enc(batchOf(hdr, desc)),
		"batch field twice":     twice,
	} {
		if ok, err := (&ConnectRequest{}).UnmarshalOwned(b); ok || err == nil {
			t.Errorf("%s: decoded (%v, %v), want refused", name, ok, err)
		}
	}
	if ok, err := (&ConnectRequest{}).UnmarshalOwned(enc(batchOf(many[:MaxBatchMessages]...))); !ok || err != nil {
		t.Errorf("a batch of MaxBatchMessages: (%v, %v), want decoded", ok, err)
	}
	var resp ConnectResponse
	inner := &ConnectResponse{Msg: &ConnectResponse_Batch{Batch: &ResponseBatch{}}}
	b, _ := proto.Marshal(&ConnectResponse{Msg: &ConnectResponse_Batch{Batch: &ResponseBatch{Msgs: []*ConnectResponse{inner}}}})
	if ok, err := resp.UnmarshalOwned(b); ok || err == nil {
		t.Errorf("response batch in a batch: decoded (%v, %v), want refused", ok, err)
	}
	gwBatch := func(msgs ...*GatewayResponse) []byte {
		b, _ := proto.Marshal(&GatewayResponse{Msg: &GatewayResponse_Batch{Batch: &GatewayBatch{Msgs: msgs}}})
		return b
	}
	ready := &GatewayResponse{Msg: &GatewayResponse_TunnelReady_{TunnelReady: &GatewayResponse_TunnelReady{}}}
	manyGW := make([]*GatewayResponse, MaxBatchMessages+1)
	for i := range manyGW {
		manyGW[i] = &GatewayResponse{}
	}
	for name, b := range map[string][]byte{
		"too many":             gwBatch(manyGW...),
		"batch in a batch":     gwBatch(ready, &GatewayResponse{Msg: &GatewayResponse_Batch{Batch: &GatewayBatch{}}}),
		"no_tunnel in a batch": gwBatch(&GatewayResponse{Msg: &GatewayResponse_NoTunnel_{NoTunnel: &GatewayResponse_NoTunnel{}}}),
	} {
		if ok, err := (&GatewayResponse{}).UnmarshalOwned(b); ok || err == nil {
			t.Errorf("gateway %s: decoded (%v, %v), want refused", name, ok, err)
		}
	}
}

// A PooledMessage is, on the wire, the ConnectRequest it stands for, and its buffer goes back to its pool
// once gRPC freed what it encoded.
func TestPooledMessagesEncodeAsTheirEnvelopes(t *testing.T) {
	for _, c := range []struct {
		name   string
		wrap   func(*Message) proto.Message
		pooled func(data *[]byte, pool mem.BufferPool) grpctool.BufferMarshaler
	}{
		{"ConnectRequest", func(m *Message) proto.Message { return &ConnectRequest{Msg: &ConnectRequest_Message{Message: m}} },
			func(d *[]byte, p mem.BufferPool) grpctool.BufferMarshaler { return &PooledMessage{Data: d, Pool: p} }},
		{"GatewayResponse", func(m *Message) proto.Message { return &GatewayResponse{Msg: &GatewayResponse_Message{Message: m}} },
			func(d *[]byte, p mem.BufferPool) grpctool.BufferMarshaler {
				return &PooledGatewayMessage{Data: d, Pool: p}
			}},
	} {
		for _, n := range []int{BatchMaxBytes + 1, 1 << 20} {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(i)
			}
			want, err := proto.Marshal(c.wrap(&Message{Data: data}))
			if err != nil {
				t.Fatal(err)
			}
			pool := pooltest.NewCountingPool()
			buf := slices.Clone(data)
			bs, ok := c.pooled(&buf, pool).MarshalBuffers()
			if !ok || !bytes.Equal(bs.Materialize(), want) {
				t.Fatalf("%s, %d bytes: encoded %d bytes (ok %v), want the message's %d", c.name, n, bs.Len(), ok, len(want))
			}
			if pool.Puts() != 0 {
				t.Fatalf("%s, %d bytes: the buffer went back before gRPC freed it", c.name, n)
			}
			bs.Free()
			if pool.Puts() != 1 {
				t.Fatalf("%s, %d bytes: the buffer went back %d times once freed, want once", c.name, n, pool.Puts())
			}
		}
	}
}

// A message whose data is a shared buffer is, on the wire, the envelope it stands for (a ConnectResponse
// or a hop message), and its encoding holds a reference of its own: the buffer goes back to its pool
// once both the owner and gRPC freed theirs.
func TestSharedMessagesEncodeAsTheirEnvelopes(t *testing.T) {
	data := make([]byte, BatchMaxBytes+1)
	for i := range data {
		data[i] = byte(i)
	}
	for _, c := range []struct {
		name string
		want proto.Message
		msg  func(mem.Buffer) grpctool.BufferMarshaler
	}{
		{"ConnectResponse", &ConnectResponse{Msg: &ConnectResponse_Message{Message: &Message{Data: data}}},
			func(b mem.Buffer) grpctool.BufferMarshaler { return &SharedResponseMessage{Buf: b} }},
		{"HopMessage", &HopRequest{Msg: &HopRequest_Message{Message: data}},
			func(b mem.Buffer) grpctool.BufferMarshaler { return &HopMessage{Data: b.ReadOnlyData(), Shared: b} }},
	} {
		want, err := proto.Marshal(c.want)
		if err != nil {
			t.Fatal(err)
		}
		pool := pooltest.NewCountingPool()
		buf := slices.Clone(data)
		shared := mem.NewBuffer(&buf, pool)
		bs, ok := c.msg(shared).MarshalBuffers()
		if !ok || !bytes.Equal(bs.Materialize(), want) {
			t.Fatalf("%s: encoded %d bytes (ok %v), want the envelope's %d", c.name, bs.Len(), ok, len(want))
		}
		shared.Free()
		if pool.Puts() != 0 {
			t.Fatalf("%s: the buffer went back while gRPC held it", c.name)
		}
		bs.Free()
		if pool.Puts() != 1 {
			t.Fatalf("%s: the buffer went back %d times once both let go, want once", c.name, pool.Puts())
		}
	}
}

// FuzzProtoFastPath checks the tunnel's and the hop's messages decoded and encoded by vtprotobuf's code
// (grpctool.ProtoUnmarshal, ProtoMarshal) against protobuf's (codectest.Agree says what may differ).
func FuzzProtoFastPath(f *testing.F) {
	seeds := []proto.Message{
		&ConnectResponse{Msg: &ConnectResponse_RequestInfo{RequestInfo: &RequestInfo{MethodName: "/s/m",
			Meta: MetaToValues(map[string][]string{"k": {"v", ""}, "x-bin": {"\xff"}}), Deadline: timestamppb.New(time.Unix(1, 2))}}},
		&ConnectRequest{Msg: &ConnectRequest_Trailer{Trailer: &Trailer{Meta: MetaToValues(map[string][]string{"t": {"1"}})}}},
		&ConnectRequest{Msg: &ConnectRequest_Error{Error: &Error{Status: &spb.Status{Code: 3, Message: "bad"}}}},
		&ConnectRequest{Msg: &ConnectRequest_Descriptor_{Descriptor_: &Descriptor{Reuse: true, AgentDescriptor: &AgentDescriptor{
			Services: []*Service{{Name: "s", Methods: []*Method{{Name: "m", OneRequest: true}}}}}}}},
		&HopRequest{Msg: &HopRequest_Start{Start: &HopStart{Method: "/s/m", Meta: MetaToValues(map[string][]string{"k": {"v"}})}}},
	}
	for _, m := range envelopes() {
		seeds = append(seeds, m)
	}
	for _, m := range seeds {
		if b, err := proto.Marshal(m); err == nil && len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Add([]byte{0x12, 0x02, 0x0a, 0x01})             // truncated
	f.Add([]byte{0x0a, 0x04, 0x0a, 0x02, 0xff, 0xfe}) // not UTF-8
	f.Add([]byte{0x10, 0x01})                         // a known field with the wrong wire type
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []proto.Message{&ConnectRequest{}, &ConnectResponse{}, &GatewayResponse{}, &HopRequest{}} {
			if err := codectest.Agree(b, m); err != nil {
				t.Fatal(err)
			}
		}
	})
}
