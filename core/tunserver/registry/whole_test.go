package registry

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
)

// batchLog records what kas sends to the agent, a batch as the states inside it.
type batchLog struct {
	sendLog
	batches [][]rpc.State
}

func (b *batchLog) Send(m *rpc.ConnectResponse) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var states []rpc.State
	if msgs := m.GetBatch().GetMsgs(); msgs != nil {
		for _, bm := range msgs {
			states = append(states, rpc.KasState(bm))
		}
	} else {
		states = []rpc.State{rpc.KasState(m)}
	}
	b.batches = append(b.batches, states)
	return nil
}

func (b *batchLog) sent() [][]rpc.State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.batches)
}

// An in-process caller that said it sends its whole request at once (request.WithWholeRequest) has it
// reach the agent as one batch with its request_info and close_send, although the agent did not say the
// method takes one request; a caller that said nothing has its request go message by message.
func TestWholeRequestLeavesAsOneBatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		whole int
		want  [][]rpc.State
	}{
		{"whole request", 2, [][]rpc.State{{rpc.StateRequestInfo, rpc.StateMessage, rpc.StateMessage, rpc.StateCloseSend}}},
		{"nothing said", 0, [][]rpc.State{{rpc.StateRequestInfo}, {rpc.StateMessage}, {rpc.StateMessage}, {rpc.StateCloseSend}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(nil, 4)
			log := &batchLog{}
			tun := newTunnel(r, 1, desc(t), log)
			tun.reuse, tun.drain = true, time.Millisecond
			tun.out.Batches = true
			if err := r.Reserve(1); err != nil {
				t.Fatal(err)
			}
			if err := r.addTunnel(tun); err != nil {
				t.Fatal(err)
			}
			defer r.finish(tun, nil, "")
			_, h := r.FindTunnel(1, testService, "M")
			fw, err := h.Get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer h.Done()
			ctx, cancel := context.WithCancel(request.WithWholeRequest(context.Background(), tc.whole))
			caller := &scriptedCaller{ctx: ctx, frames: [][]byte{[]byte("header"), []byte("end")}}
			pump := request.Start(caller, &rpc.RequestInfo{MethodName: "/" + testService + "/M"}, request.DefaultReplayLimit)
			done := make(chan error, 1)
			go func() { done <- fw.Forward(ctx, pump, func(*rpc.ConnectRequest, *[]byte, bool) error { return nil }) }()
			deadline := time.Now().Add(waitBound)
			for states := 0; states < 4; {
				states = 0
				for _, b := range log.sent() {
					states += len(b)
				}
				if time.Now().After(deadline) {
					t.Fatalf("the agent got %v within %v, want the whole request", log.sent(), waitBound)
				}
				time.Sleep(time.Millisecond)
			}
			cancel() // no agent answers: the caller gives up
			<-done
			if got := log.sent()[:len(tc.want)]; !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("the agent got %v, want %v", got, tc.want)
			}
		})
	}
}
