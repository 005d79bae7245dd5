package rpc

import (
	"bytes"
	"slices"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/grpctool/pooltest"
)

// A batch that carries payloads of medium size is decoded out of gRPC's buffer when it came in one, and
// out of a pooled copy of its buffers otherwise: each payload of grpctool.MediumMin bytes or more comes
// out in a pooled buffer of exactly its bytes, handed out by the unbatcher with its message, a smaller
// one in a slice of its own; none is a slice of what was received, which gRPC reuses once decoding
// returns.
func TestBatchedPayloadsComeOutPooled(t *testing.T) {
	for name, deliver := range map[string]func([]byte) mem.BufferSlice{
		"one buffer":      func(b []byte) mem.BufferSlice { return mem.BufferSlice{mem.SliceBuffer(b)} },
		"several buffers": chunked,
	} {
		t.Run(name, func(t *testing.T) { batchedPayloadsComeOutPooled(t, deliver) })
	}
}

func batchedPayloadsComeOutPooled(t *testing.T, deliver func([]byte) mem.BufferSlice) {
	medium := bytes.Repeat([]byte("medium"), 700) // 4 200 bytes
	small := []byte("small")
	sent := &ConnectResponse{Msg: &ConnectResponse_Batch{Batch: &ResponseBatch{Msgs: []*ConnectResponse{
		{Msg: &ConnectResponse_RequestInfo{RequestInfo: &RequestInfo{MethodName: "/s/m"}}},
		{Msg: &ConnectResponse_Message{Message: &Message{Data: medium}}},
		{Msg: &ConnectResponse_Message{Message: &Message{Data: small}}},
		{Msg: &ConnectResponse_CloseSend{CloseSend: &CloseSend{}}},
	}}}}
	b, err := proto.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	received := slices.Clone(b)
	c := &BatchedConnectClient{}
	recv := func() (*ConnectResponse, *[]byte, []*[]byte, error) {
		return recvPooled(delivered(deliver(received)), connectResponseMessageField, setResponseMessage)
	}
	var got []*ConnectResponse
	var pooled []*[]byte
	for range sent.GetBatch().GetMsgs() {
		m, p, err := c.in.next(recv, func(m *ConnectResponse) ([]*ConnectResponse, bool) {
			if b, ok := m.GetMsg().(*ConnectResponse_Batch); ok {
				return b.Batch.GetMsgs(), true
			}
			return nil, false
		})
		if err != nil {
			t.Fatal(err)
		}
		got, pooled = append(got, m), append(pooled, p)
	}
	clear(received) // gRPC reuses its buffers
	for i, want := range sent.GetBatch().GetMsgs() {
		if !proto.Equal(got[i], want) {
			t.Fatalf("message %d: %v, want %v", i, got[i], want)
		}
	}
	if p := pooled[1]; p == nil || !bytes.Equal(*p, medium) || &(*p)[0] != &got[1].GetMessage().GetData()[0] {
		t.Fatal("the medium payload is not in a pooled buffer of exactly its bytes")
	}
	for _, i := range []int{0, 2, 3} {
		if pooled[i] != nil {
			t.Fatalf("message %d came with a pooled buffer", i)
		}
	}
}

// A lone Message envelope of medium size comes out pooled as a large one does.
func TestMediumLonePayloadIsPooled(t *testing.T) {
	payload := bytes.Repeat([]byte{9}, grpctool.MediumMin)
	b, err := proto.Marshal(&ConnectResponse{Msg: &ConnectResponse_Message{Message: &Message{Data: payload}}})
	if err != nil {
		t.Fatal(err)
	}
	got, pooled, err := recvResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	if pooled == nil || !bytes.Equal(*pooled, payload) || !bytes.Equal(got.GetMessage().GetData(), payload) {
		t.Fatal("a lone payload of grpctool.MediumMin bytes is not in a pooled buffer of exactly its bytes")
	}
}

// An answer's medium pooled message joins the batch (one gRPC message for the whole answer), which is on
// the wire the RequestBatch of the plain messages; a pooled payload copied into the batch's buffer goes
// back once encoded, one that keeps a buffer of its own once gRPC freed the encoding.
func TestBatcherKeepsPooledMessages(t *testing.T) {
	for _, n := range []int{batchInlineMax, 4 << 10} {
		data := mediumData(n)
		header := &ConnectRequest{Msg: &ConnectRequest_Header{Header: &Header{}}}
		trailer := &ConnectRequest{Msg: &ConnectRequest_Trailer{Trailer: &Trailer{}}}
		want, err := proto.Marshal(&ConnectRequest{Msg: &ConnectRequest_Batch{Batch: &RequestBatch{Msgs: []*ConnectRequest{
			header, {Msg: &ConnectRequest_Message{Message: &Message{Data: data}}}, trailer,
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		s := &encodingStream{}
		checkKeepsPooled(t, "batched", &RequestBatcher{Stream: s}, &s.Encoder, data,
			[]*ConnectRequest{header}, []*ConnectRequest{trailer}, want, n <= batchInlineMax)
	}
}

// The gateway's answer does the same on a hop stream: a medium pooled payload of the agent's joins the
// GatewayBatch (on the wire the batch of the plain messages), a lone one goes as a gateway Message, and
// its buffer goes back once, when copied into the batch or when gRPC freed the encoding.
func TestGatewayBatcherKeepsPooledMessages(t *testing.T) {
	for _, n := range []int{batchInlineMax, 4 << 10} {
		data := mediumData(n)
		ready := &GatewayResponse{Msg: &GatewayResponse_TunnelReady_{TunnelReady: &GatewayResponse_TunnelReady{}}}
		message := &GatewayResponse{Msg: &GatewayResponse_Message{Message: &Message{Data: data}}}
		trailer := &GatewayResponse{Msg: &GatewayResponse_Trailer{Trailer: &Trailer{}}}
		batched, err := proto.Marshal(&GatewayResponse{Msg: &GatewayResponse_Batch{Batch: &GatewayBatch{Msgs: []*GatewayResponse{ready, message, trailer}}}})
		if err != nil {
			t.Fatal(err)
		}
		lone, err := proto.Marshal(message)
		if err != nil {
			t.Fatal(err)
		}
		s := &pooltest.Encoder{}
		checkKeepsPooled(t, "batched", &GatewayBatcher{Stream: s}, s, data,
			[]*GatewayResponse{ready}, []*GatewayResponse{trailer}, batched, n <= batchInlineMax)
		s = &pooltest.Encoder{}
		checkKeepsPooled(t, "alone", &GatewayBatcher{Stream: s}, s, data, nil, nil, lone, false)
	}
}

func mediumData(n int) []byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i)
	}
	return data
}

// checkKeepsPooled sends before, data in a pooled buffer (as a tunnel's receiver or the agent's encoder
// hands it over), then after through b, whose stream is s, and flushes: s must get one message, want,
// and the buffer must go back exactly once, at encoding when inline (copied into the batch), else only
// once gRPC freed the encoding.
func checkKeepsPooled[M any](t *testing.T, name string, b interface {
	Send(M) error
	SendPooled(*PooledMessage) error
	Flush() error
}, s *pooltest.Encoder, data []byte, before, after []M, want []byte, inline bool) {
	t.Helper()
	n := len(data)
	pool := pooltest.NewCountingPool()
	buf := pool.Get(n)
	copy(*buf, data)
	for _, m := range before {
		if err := b.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SendPooled(&PooledMessage{Data: buf, Pool: pool}); err != nil {
		t.Fatal(err)
	}
	for _, m := range after {
		if err := b.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.Sent) != 0 {
		t.Fatalf("%s, %d bytes: %d messages sent before the flush", name, n, len(s.Sent))
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(s.Sent) != 1 || !bytes.Equal(s.Sent[0].Materialize(), want) {
		t.Fatalf("%s, %d bytes: sent %d messages, want one: the plain messages' encoding", name, n, len(s.Sent))
	}
	if back := pool.Puts() == 1; back != inline {
		t.Fatalf("%s, %d bytes: buffer back before gRPC freed the encoding: %v, want %v", name, n, back, inline)
	}
	s.Sent[0].Free()
	if pool.Puts() != 1 {
		t.Fatalf("%s, %d bytes: the buffer went back %d times, want once", name, n, pool.Puts())
	}
}

// encodingStream is an agent's tunnel stream that encodes what is sent as gRPC does and keeps it.
type encodingStream struct{ pooltest.Encoder }

func (s *encodingStream) Send(m *ConnectRequest) error { return s.SendMsg(m) }
