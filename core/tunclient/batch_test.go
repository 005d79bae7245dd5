package tunclient

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// batchingKas takes the agent's offer of batches, sends one health check as one batch (request_info,
// message, close_send) and reports every message the agent sent for it, as it arrived, batches whole.
type batchingKas struct {
	rpc.UnimplementedReverseTunnelServer
	got chan []*rpc.ConnectRequest
	// method is the call's method; a health check when empty.
	method string
}

func (k batchingKas) Connect(stream rpc.ReverseTunnel_ConnectServer) error {
	var first grpctool.RawFrame
	if err := stream.RecvMsg(&first); err != nil {
		return err
	}
	var d rpc.ConnectRequest
	if err := proto.Unmarshal(first.Data, &d); err != nil || !d.GetDescriptor_().GetBatches() {
		select {
		case k.got <- nil: // the agent did not offer batches
		default:
		}
		return nil
	}
	if err := stream.SendHeader(metadata.Pairs(rpc.TunnelReuseHeaderKey, "1", rpc.TunnelBatchesHeaderKey, "1")); err != nil {
		return err
	}
	req, _ := proto.Marshal(&grpc_health_v1.HealthCheckRequest{})
	method := k.method
	if method == "" {
		method = grpc_health_v1.Health_Check_FullMethodName
	}
	call := []*rpc.ConnectResponse{
		{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{MethodName: method}}},
		{Msg: &rpc.ConnectResponse_Message{Message: &rpc.Message{Data: req}}},
		{Msg: &rpc.ConnectResponse_CloseSend{CloseSend: &rpc.CloseSend{}}},
	}
	if err := stream.Send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_Batch{Batch: &rpc.ResponseBatch{Msgs: call}}}); err != nil {
		return err
	}
	var sent []*rpc.ConnectRequest
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		sent = append(sent, m)
		b := m.GetBatch().GetMsgs()
		if m.GetCallEnd() != nil || len(b) > 0 && b[len(b)-1].GetCallEnd() != nil {
			break
		}
	}
	select {
	case k.got <- sent:
	default: // a later tunnel: the test has what it needs
	}
	if err := stream.Send(&rpc.ConnectResponse{Msg: &rpc.ConnectResponse_CallEnd{CallEnd: &rpc.CallEnd{}}}); err != nil {
		return err
	}
	for { // idle until the agent withdraws the tunnel
		if _, err := stream.Recv(); err != nil {
			return nil
		}
	}
}

// On a batched tunnel a call sent as one batch is served, and its whole answer (header, message,
// trailer and the agent's call_end) comes back as one message.
func TestBatchedTunnelAnswersInOneMessage(t *testing.T) {
	k := batchingKas{got: make(chan []*rpc.ConnectRequest, 1)}
	startAgentOn(t, k, Config{MinIdle: 1})
	var sent []*rpc.ConnectRequest
	select {
	case sent = <-k.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s")
	}
	if len(sent) != 1 {
		t.Fatalf("the agent sent %d messages for the call, want one batch: %v", len(sent), sent)
	}
	var states []rpc.State
	for _, m := range sent[0].GetBatch().GetMsgs() {
		states = append(states, rpc.AgentState(m))
	}
	if want := []rpc.State{rpc.StateHeader, rpc.StateMessage, rpc.StateTrailer, rpc.StateCallEnd}; !slices.Equal(states, want) {
		t.Fatalf("the batch holds %v, want %v", states, want)
	}
	var resp grpc_health_v1.HealthCheckResponse
	if err := proto.Unmarshal(sent[0].GetBatch().GetMsgs()[1].GetMessage().GetData(), &resp); err != nil || resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("answer %v (%v), want SERVING", &resp, err)
	}
}

// holdingWatch is a server-streaming method whose handler sends one message as it comes, then says that
// the rest of its answer is at hand (grpctool.HoldAnswer) and sends two more.
var holdingWatch = grpc.ServiceDesc{
	ServiceName: "test.Holding",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{StreamName: "Watch", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
		var req grpc_health_v1.HealthCheckRequest
		if err := ss.RecvMsg(&req); err != nil {
			return err
		}
		if err := ss.SendMsg(&grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}); err != nil {
			return err
		}
		if !grpctool.HoldAnswer(ss.Context()) {
			return status.Error(codes.Internal, "the tunnel's stream does not hold answers")
		}
		for range 2 {
			if err := ss.SendMsg(&grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_NOT_SERVING}); err != nil {
				return err
			}
		}
		return nil
	}}},
}

// A streaming answer leaves message by message until its handler holds the rest (grpctool.HoldAnswer):
// what it sends then leaves with its end, as one batch.
func TestHeldAnswerLeavesWithTheCallEnd(t *testing.T) {
	k := batchingKas{got: make(chan []*rpc.ConnectRequest, 1), method: "/test.Holding/Watch"}
	startAgentOn(t, k, Config{MinIdle: 1}, func(a *Agent) { a.RegisterService(&holdingWatch, nil) })
	var sent []*rpc.ConnectRequest
	select {
	case sent = <-k.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s")
	}
	var got [][]rpc.State
	for _, m := range sent {
		if b := m.GetBatch(); b != nil {
			var states []rpc.State
			for _, bm := range b.GetMsgs() {
				states = append(states, rpc.AgentState(bm))
			}
			got = append(got, states)
			continue
		}
		got = append(got, []rpc.State{rpc.AgentState(m)})
	}
	want := [][]rpc.State{{rpc.StateHeader}, {rpc.StateMessage}, {rpc.StateMessage, rpc.StateMessage, rpc.StateTrailer, rpc.StateCallEnd}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("the agent sent %v, want %v (the held part as one batch)", got, want)
	}
}

func TestHoldAnswerOutsideATunnelDoesNothing(t *testing.T) {
	if grpctool.HoldAnswer(context.Background()) {
		t.Fatal("HoldAnswer reported a held answer without a tunnel's stream")
	}
}
