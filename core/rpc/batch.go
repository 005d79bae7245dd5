package rpc

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// A batched tunnel (Descriptor.batches and TunnelBatchesHeaderKey) may carry several messages of one
// direction as one RequestBatch or ResponseBatch. The receiver unpacks them where it reads the stream,
// so that everything above (state tables, forwarding, the agent's call) sees the messages one by one,
// exactly as if they had come so; a batch inside a batch comes out as it is, as StateBatch, which no
// table allows.

// BatchedConnectServer is kas's end of a batched tunnel: Recv hands out a RequestBatch's messages one at
// a time. Only one goroutine may call Recv.
type BatchedConnectServer struct {
	ReverseTunnel_ConnectServer
	in unbatcher[*ConnectRequest]
}

// Recv returns the next message, from the last batch or from the stream.
func (s *BatchedConnectServer) Recv() (*ConnectRequest, error) {
	m, _, err := s.RecvPooled()
	return m, err
}

// RecvPooled is Recv with a large lone payload pooled (see PooledRequestReceiver).
func (s *BatchedConnectServer) RecvPooled() (*ConnectRequest, *[]byte, error) {
	return s.in.next(func() (*ConnectRequest, *[]byte, []*[]byte, error) {
		return recvPooledRequest(s.ReverseTunnel_ConnectServer)
	}, func(m *ConnectRequest) ([]*ConnectRequest, bool) {
		if b, ok := m.GetMsg().(*ConnectRequest_Batch); ok {
			return b.Batch.GetMsgs(), true
		}
		return nil, false
	})
}

// BatchedConnectClient is the agent's end of a batched tunnel: Recv hands out a ResponseBatch's
// messages one at a time. Only one goroutine may call Recv.
type BatchedConnectClient struct {
	ReverseTunnel_ConnectClient
	in unbatcher[*ConnectResponse]
}

// Recv returns the next message, from the last batch or from the stream.
func (c *BatchedConnectClient) Recv() (*ConnectResponse, error) {
	m, _, err := c.RecvPooled()
	return m, err
}

// RecvPooled is Recv with a large lone payload pooled (see PooledResponseReceiver).
func (c *BatchedConnectClient) RecvPooled() (*ConnectResponse, *[]byte, error) {
	return c.in.next(func() (*ConnectResponse, *[]byte, []*[]byte, error) {
		return recvPooledResponse(c.ReverseTunnel_ConnectClient)
	}, func(m *ConnectResponse) ([]*ConnectResponse, bool) {
		if b, ok := m.GetMsg().(*ConnectResponse_Batch); ok {
			return b.Batch.GetMsgs(), true
		}
		return nil, false
	})
}

// unbatcher keeps what is left of the last batch received, and the pooled buffers of its payloads.
type unbatcher[M any] struct {
	pending []M
	pooled  []*[]byte // pooled[i] is pending[i]'s (nil: none); nil when none has one
}

// next returns the next pending message, or reads one with recv: a batch (batched reports it) becomes
// the pending messages, an empty one is nothing. A message comes with the pooled buffer of its payload,
// if it has one (recv returns those of a lone message and of a batch's messages); a batch that is not
// unpacked leaves its messages' buffers to the garbage collector.
func (u *unbatcher[M]) next(recv func() (M, *[]byte, []*[]byte, error), batched func(M) ([]M, bool)) (M, *[]byte, error) {
	for len(u.pending) == 0 {
		m, pooled, entries, err := recv()
		if err != nil {
			return m, nil, err
		}
		msgs, ok := batched(m)
		if !ok {
			return m, pooled, nil
		}
		u.pending, u.pooled = msgs, entries
	}
	m := u.pending[0]
	var zero M
	u.pending[0] = zero
	u.pending = u.pending[1:]
	var pooled *[]byte
	if len(u.pooled) > 0 {
		pooled = u.pooled[0]
		u.pooled[0] = nil
		u.pooled = u.pooled[1:]
	}
	return m, pooled, nil
}

// BatchMaxBytes bounds what a sender puts in one batch: a message larger than that goes alone, so that
// its payload is never copied into a batch (a lone Message envelope is encoded around it; see
// MarshalBuffers), and what waits to be batched stays small.
const BatchMaxBytes = 16 << 10

// RequestBatcher collects agent messages to send them as one (see RequestBatch). The zero value with
// Stream set is ready; only one goroutine may use it.
type RequestBatcher struct {
	Stream interface {
		Send(*ConnectRequest) error
	}
	kept batcher[*ConnectRequest]
}

// Send keeps m for Flush. A message larger than BatchMaxBytes, or one that would take the batch past it
// or past MaxBatchMessages, makes the batch go first; the large one then goes alone.
func (b *RequestBatcher) Send(m *ConnectRequest) error {
	return b.kept.send(m, nil, b.Flush, b.sendOne)
}

// SendPooled keeps m for Flush as Send does: its buffer goes with the batch to gRPC, which puts it back
// once written (or once copied into the batch), so that a medium answer costs no new memory either. A
// large one goes alone.
func (b *RequestBatcher) SendPooled(m *PooledMessage) error {
	return b.kept.send(&ConnectRequest{Msg: &ConnectRequest_Message{Message: &Message{Data: *m.Data}}}, m, b.Flush, b.sendOne)
}

// Flush sends what Send kept: one message as it is, several as one batch.
func (b *RequestBatcher) Flush() error {
	return b.kept.flush(b.sendOne, func(msgs []*ConnectRequest, pooled []*PooledMessage) any {
		return withPooled(&ConnectRequest{Msg: &ConnectRequest_Batch{Batch: &RequestBatch{Msgs: msgs}}}, connectRequestBatchField, msgs, pooled)
	})
}

// sendOne sends m, or p when m's payload is p's buffer.
func (b *RequestBatcher) sendOne(m any) error {
	switch x := m.(type) {
	case *PooledMessage:
		return SendPooledOn(b.Stream, x)
	case *pooledBatch[*ConnectRequest]:
		if s, ok := b.Stream.(interface{ SendMsg(any) error }); ok {
			return s.SendMsg(x)
		}
		return b.Stream.Send(x.plain) // the buffers are left to the garbage collector
	}
	return b.Stream.Send(m.(*ConnectRequest))
}

// pooledBatch is a batch (plain, in field of its envelope) some of whose messages' payloads are pooled
// buffers (pooled[i] for msgs[i], nil for the others). On the wire it is plain.
type pooledBatch[M batchable] struct {
	plain  M
	field  protowire.Number
	msgs   []M
	pooled []*PooledMessage
}

// withPooled is the batch plain of msgs as it is when none of their payloads is pooled, and as a
// pooledBatch otherwise.
func withPooled[M batchable](plain M, field protowire.Number, msgs []M, pooled []*PooledMessage) any {
	if pooled == nil {
		return plain
	}
	return &pooledBatch[M]{plain: plain, field: field, msgs: msgs, pooled: pooled}
}

// MarshalBuffers implements grpctool.BufferMarshaler: a pooled payload copied into the batch's buffer
// goes back at once, one that keeps a buffer of its own goes to gRPC, which puts it back once written.
func (b *pooledBatch[M]) MarshalBuffers() (mem.BufferSlice, bool) {
	bufs := make([]mem.Buffer, len(b.pooled))
	for i, p := range b.pooled {
		if p != nil {
			bufs[i] = mem.NewBuffer(p.Data, p.Pool)
		}
	}
	return batchBuffersWith(b.field, b.msgs, bufs)
}

// batcher is what RequestBatcher and GatewayBatcher share: the messages kept to leave as one batch.
type batcher[M batchable] struct {
	msgs  []M
	bytes int
	// pooled[i] is the pooled buffer msgs[i]'s payload is (nil: none); nil when no message has one.
	pooled []*PooledMessage
}

// send keeps m, whose payload is p's buffer when p is set, for flush. A message larger than
// BatchMaxBytes, or one that would take the batch past it or past MaxBatchMessages, makes the batch go
// first (flush); the large one then goes alone (one, given p when set).
func (b *batcher[M]) send(m M, p *PooledMessage, flush func() error, one func(any) error) error {
	n := batchedSize(m)
	if b.bytes+n > BatchMaxBytes || len(b.msgs) == MaxBatchMessages {
		if err := flush(); err != nil {
			return err
		}
		if n > BatchMaxBytes {
			if p != nil {
				return one(p)
			}
			return one(m)
		}
	}
	if b.msgs == nil {
		b.msgs = make([]M, 0, 5) // a small call's answer: header, message, trailer, call_end or tunnel_ready
	}
	if p != nil && b.pooled == nil {
		b.pooled = make([]*PooledMessage, len(b.msgs), cap(b.msgs))
	}
	b.msgs = append(b.msgs, m)
	if b.pooled != nil {
		b.pooled = append(b.pooled, p)
	}
	b.bytes += n
	return nil
}

// flush sends what send kept: one message as it is (one, or its PooledMessage), several as one batch
// (batch wraps them, with their pooled buffers when any has one).
func (b *batcher[M]) flush(one func(any) error, batch func([]M, []*PooledMessage) any) error {
	msgs, pooled := b.msgs, b.pooled
	b.msgs, b.pooled, b.bytes = nil, nil, 0
	switch len(msgs) {
	case 0:
		return nil
	case 1:
		if pooled != nil && pooled[0] != nil {
			return one(pooled[0])
		}
		return one(msgs[0])
	}
	return one(batch(msgs, pooled))
}

// batchedSize is about what m adds to a batch: a Message's payload is counted without encoding it.
func batchedSize[M batchable](m M) int {
	if data, _, ok := m.envelopeData(); ok {
		return len(data) + 8
	}
	return grpctool.ProtoSize(m) + 4
}

// Peek is the next message Recv returns from the last batch, or nil when Recv would read the stream.
func (s *BatchedConnectServer) Peek() *ConnectRequest {
	if len(s.in.pending) == 0 {
		return nil
	}
	return s.in.pending[0]
}

// GatewayReceiver is the routing kas's end of a gateway stream: RecvPooled hands out a large lone
// payload pooled (see RecvGatewayPooled) and, on a stream that offered them (Batches), a GatewayBatch's
// messages one at a time; elsewhere a batch comes out as it is, as StateBatch, which no table allows.
// Only one goroutine may use it.
type GatewayReceiver struct {
	Stream  grpc.ClientStream
	Batches bool
	in      unbatcher[*GatewayResponse]
}

// RecvPooled returns the next message, from the last batch or from the stream.
func (r *GatewayReceiver) RecvPooled() (*GatewayResponse, *[]byte, error) {
	return r.in.next(func() (*GatewayResponse, *[]byte, []*[]byte, error) {
		return recvPooled(r.Stream, gatewayResponseMessageField, setGatewayMessage)
	}, func(m *GatewayResponse) ([]*GatewayResponse, bool) {
		if b, ok := m.GetMsg().(*GatewayResponse_Batch); ok && r.Batches {
			return b.Batch.GetMsgs(), true
		}
		return nil, false
	})
}

// GatewayBatcher collects a gateway's messages to the routing kas to send them as one GatewayBatch, as
// RequestBatcher does for an agent. The zero value with Stream set is ready; only one goroutine may use
// it.
type GatewayBatcher struct {
	Stream interface{ SendMsg(any) error }
	kept   batcher[*GatewayResponse]
}

// Send keeps m for Flush, as RequestBatcher.Send does.
func (b *GatewayBatcher) Send(m *GatewayResponse) error {
	return b.kept.send(m, nil, b.Flush, b.sendOne)
}

// SendPooled keeps an agent's message whose payload is m's buffer for Flush, as RequestBatcher.SendPooled
// does: the buffer goes back to its pool once copied into the batch or written.
func (b *GatewayBatcher) SendPooled(m *PooledMessage) error {
	return b.kept.send(&GatewayResponse{Msg: &GatewayResponse_Message{Message: &Message{Data: *m.Data}}}, m, b.Flush, b.sendOne)
}

// Flush sends what Send kept: one message as it is, several as one batch.
func (b *GatewayBatcher) Flush() error {
	return b.kept.flush(b.sendOne, func(msgs []*GatewayResponse, pooled []*PooledMessage) any {
		return withPooled(&GatewayResponse{Msg: &GatewayResponse_Batch{Batch: &GatewayBatch{Msgs: msgs}}}, gatewayResponseBatchField, msgs, pooled)
	})
}

// sendOne sends m; a lone pooled message as a gateway stream's Message.
func (b *GatewayBatcher) sendOne(m any) error {
	if p, ok := m.(*PooledMessage); ok {
		return b.Stream.SendMsg((*PooledGatewayMessage)(p))
	}
	return b.Stream.SendMsg(m)
}
