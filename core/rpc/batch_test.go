package rpc

import (
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// recvQueue is a Connect stream that returns its messages, then err.
type recvQueue[M any] struct {
	msgs []M
	err  error
}

func (q *recvQueue[M]) Recv() (M, error) {
	if len(q.msgs) == 0 {
		var zero M
		return zero, q.err
	}
	m := q.msgs[0]
	q.msgs = q.msgs[1:]
	return m, nil
}

type serverQueue struct {
	ReverseTunnel_ConnectServer
	recvQueue[*ConnectRequest]
}

func (s *serverQueue) Recv() (*ConnectRequest, error) { return s.recvQueue.Recv() }

type clientQueue struct {
	ReverseTunnel_ConnectClient
	recvQueue[*ConnectResponse]
}

func (c *clientQueue) Recv() (*ConnectResponse, error) { return c.recvQueue.Recv() }

// The receiver hands out a batch's messages one by one and in order, between the messages around it; an
// empty batch is nothing; the stream's error comes after the last message.
func TestBatchedStreamsUnpackInOrder(t *testing.T) {
	end := errors.New("stream ended")
	hdr := &ConnectRequest{Msg: &ConnectRequest_Header{Header: &Header{}}}
	msg := &ConnectRequest{Msg: &ConnectRequest_Message{Message: &Message{}}}
	trl := &ConnectRequest{Msg: &ConnectRequest_Trailer{Trailer: &Trailer{}}}
	ce := &ConnectRequest{Msg: &ConnectRequest_CallEnd{CallEnd: &CallEnd{}}}
	reqBatch := func(msgs ...*ConnectRequest) *ConnectRequest {
		return &ConnectRequest{Msg: &ConnectRequest_Batch{Batch: &RequestBatch{Msgs: msgs}}}
	}
	s := &BatchedConnectServer{ReverseTunnel_ConnectServer: &serverQueue{recvQueue: recvQueue[*ConnectRequest]{
		msgs: []*ConnectRequest{hdr, reqBatch(), reqBatch(msg, trl), ce}, err: end}}}
	var got []State
	for {
		m, err := s.Recv()
		if err != nil {
			if err != end {
				t.Fatalf("error %v, want the stream's", err)
			}
			break
		}
		got = append(got, AgentState(m))
	}
	if want := []State{StateHeader, StateMessage, StateTrailer, StateCallEnd}; !slices.Equal(got, want) {
		t.Fatalf("agent messages %v, want %v", got, want)
	}

	info := &ConnectResponse{Msg: &ConnectResponse_RequestInfo{RequestInfo: &RequestInfo{}}}
	cs := &ConnectResponse{Msg: &ConnectResponse_CloseSend{CloseSend: &CloseSend{}}}
	c := &BatchedConnectClient{ReverseTunnel_ConnectClient: &clientQueue{recvQueue: recvQueue[*ConnectResponse]{
		msgs: []*ConnectResponse{{Msg: &ConnectResponse_Batch{Batch: &ResponseBatch{Msgs: []*ConnectResponse{info, cs}}}}}, err: end}}}
	got = nil
	for {
		m, err := c.Recv()
		if err != nil {
			break
		}
		got = append(got, KasState(m))
	}
	if want := []State{StateRequestInfo, StateCloseSend}; !slices.Equal(got, want) {
		t.Fatalf("kas messages %v, want %v", got, want)
	}
}

// The batcher sends one message as it is and several as one batch, and never lets a batch grow past
// BatchMaxBytes or MaxBatchMessages: a large message goes alone, after what was kept.
func TestRequestBatcherBounds(t *testing.T) {
	var sent []*ConnectRequest
	b := &RequestBatcher{Stream: sendFunc(func(m *ConnectRequest) error { sent = append(sent, m); return nil })}
	small := &ConnectRequest{Msg: &ConnectRequest_Message{Message: &Message{Data: make([]byte, 10)}}}
	large := &ConnectRequest{Msg: &ConnectRequest_Message{Message: &Message{Data: make([]byte, BatchMaxBytes+1)}}}
	for _, m := range []*ConnectRequest{small, small, large, small} {
		if err := b.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 3 || len(sent[0].GetBatch().GetMsgs()) != 2 || sent[1] != large || sent[2] != small {
		t.Fatalf("sent %d messages (first a batch of %d), want a batch of 2, the large one, the last alone", len(sent), len(sent[0].GetBatch().GetMsgs()))
	}
	sent = nil
	for range MaxBatchMessages + 1 {
		if err := b.Send(&ConnectRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 || len(sent[0].GetBatch().GetMsgs()) != MaxBatchMessages {
		t.Fatalf("%d sends, want a full batch of %d and the one after it", len(sent), MaxBatchMessages)
	}
}

type sendFunc func(*ConnectRequest) error

func (f sendFunc) Send(m *ConnectRequest) error { return f(m) }

// gatewayQueue is a gateway stream that returns its messages, then err, and records what is sent.
type gatewayQueue struct {
	grpc.ClientStream
	recvQueue[*GatewayResponse]
	sent []*GatewayResponse
}

func (q *gatewayQueue) RecvMsg(m any) error {
	got, err := q.recvQueue.Recv()
	if err != nil {
		return err
	}
	b, err := proto.Marshal(got)
	if err != nil {
		return err
	}
	return grpctool.RawCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m)
}

func (q *gatewayQueue) SendMsg(m any) error {
	q.sent = append(q.sent, m.(*GatewayResponse))
	return nil
}

// What a gateway batches the routing kas reads one by one, in order, and a gateway batch keeps the
// bounds of the agent's: a large message alone, after what was kept.
func TestGatewayBatchesRoundTrip(t *testing.T) {
	ready := &GatewayResponse{Msg: &GatewayResponse_TunnelReady_{TunnelReady: &GatewayResponse_TunnelReady{}}}
	hdr := &GatewayResponse{Msg: &GatewayResponse_Header{Header: &Header{}}}
	small := &GatewayResponse{Msg: &GatewayResponse_Message{Message: &Message{Data: []byte("hi")}}}
	large := &GatewayResponse{Msg: &GatewayResponse_Message{Message: &Message{Data: make([]byte, BatchMaxBytes+1)}}}
	trl := &GatewayResponse{Msg: &GatewayResponse_Trailer{Trailer: &Trailer{}}}
	q := &gatewayQueue{}
	b := &GatewayBatcher{Stream: q}
	for _, m := range []*GatewayResponse{ready, hdr, small, large, small, trl} {
		if err := b.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(q.sent) != 3 || len(q.sent[0].GetBatch().GetMsgs()) != 3 || q.sent[1] != large || len(q.sent[2].GetBatch().GetMsgs()) != 2 {
		t.Fatalf("sent %d messages, want a batch of 3, the large one, a batch of 2", len(q.sent))
	}
	end := errors.New("stream ended")
	q.recvQueue = recvQueue[*GatewayResponse]{msgs: q.sent, err: end}
	r := &GatewayReceiver{Stream: q, Batches: true}
	var got []State
	for {
		m, _, err := r.RecvPooled()
		if err != nil {
			if err != end {
				t.Fatalf("error %v, want the stream's", err)
			}
			break
		}
		got = append(got, GatewayState(m))
	}
	want := []State{StateTunnelReady, StateHeader, StateMessage, StateMessage, StateMessage, StateTrailer}
	if !slices.Equal(got, want) {
		t.Fatalf("gateway messages %v, want %v", got, want)
	}
	// On a stream that did not offer batches, a batch is a protocol violation for the state table.
	q.recvQueue = recvQueue[*GatewayResponse]{msgs: q.sent[:1], err: end}
	if m, _, err := (&GatewayReceiver{Stream: q}).RecvPooled(); err != nil || GatewayState(m) != StateBatch {
		t.Fatalf("a batch on a stream without batches: %v, %v; want it whole, as StateBatch", m, err)
	}
}
