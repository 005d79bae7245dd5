package registry

import (
	"io"
	"slices"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// recvLog is an agent's stream that returns its messages, then io.EOF.
type recvLog struct {
	rpc.ReverseTunnel_ConnectServer
	msgs []*rpc.ConnectRequest
}

func (r *recvLog) Recv() (*rpc.ConnectRequest, error) {
	if len(r.msgs) == 0 {
		return nil, io.EOF
	}
	m := r.msgs[0]
	r.msgs = r.msgs[1:]
	return m, nil
}

// A sink is told that more follows for every message of an agent's batch but the last one it gets: the
// one before call_end, which no sink gets, ends what it may hold, as does a message that came alone.
func TestSinkHearsWhatFollowsInTheBatch(t *testing.T) {
	msg := func(s string) *rpc.ConnectRequest {
		return &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Message{Message: &rpc.Message{Data: []byte(s)}}}
	}
	hdr := &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Header{Header: &rpc.Header{}}}
	trl := &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Trailer{Trailer: &rpc.Trailer{}}}
	ce := &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_CallEnd{CallEnd: &rpc.CallEnd{}}}
	batch := func(msgs ...*rpc.ConnectRequest) *rpc.ConnectRequest {
		return &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Batch{Batch: &rpc.RequestBatch{Msgs: msgs}}}
	}
	stream := &rpc.BatchedConnectServer{ReverseTunnel_ConnectServer: &recvLog{msgs: []*rpc.ConnectRequest{
		batch(hdr, msg("a"), trl, ce), hdr, batch(msg("b"), msg("c")), batch(trl, ce)}}}
	tun := &Tunnel{stream: stream}
	var got []bool
	for {
		if _, _, err := rpc.RecvRequestPooled(tun.stream); err != nil {
			break
		}
		got = append(got, tun.moreForSink())
	}
	want := []bool{true, true, false, false, false, true, false, false, false}
	if !slices.Equal(got, want) {
		t.Fatalf("more %v, want %v", got, want)
	}
}
