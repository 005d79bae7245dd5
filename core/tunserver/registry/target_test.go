package registry

import (
	"testing"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
)

// A call's request waits to leave as one batch only on a batched tunnel, for a method whose caller the
// agent said sends one request or whose in-process caller said it sends its whole request at once
// (request.WithWholeRequest), and when the batch fits in a tunnel message whatever its request_info.
func TestTargetHoldsOnlyWhatMakesAFittingBatch(t *testing.T) {
	d, err := descriptor.NewIndex(&rpc.AgentDescriptor{Services: []*rpc.Service{{Name: testService, Methods: []*rpc.Method{
		{Name: "Unary", OneRequest: true}, {Name: "Streaming"},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	info := func(method string) *rpc.ConnectResponse {
		return &rpc.ConnectResponse{Msg: &rpc.ConnectResponse_RequestInfo{RequestInfo: &rpc.RequestInfo{MethodName: "/" + testService + "/" + method}}}
	}
	const maxSend = 64 << 10
	for _, tc := range []struct {
		name         string
		batches      bool
		method       string
		infoSize     int
		whole        int
		wantMessages int
		wantHold     bool
	}{
		{"batched, one request", true, "Unary", 100, 0, 1, true},
		{"batched, streaming requests", true, "Streaming", 100, 0, 0, false},
		{"batched, streaming, whole request", true, "Streaming", 100, 2, 2, true},
		{"not batched", false, "Unary", 100, 0, 1, false},
		{"not batched, whole request", false, "Streaming", 100, 2, 2, false},
		{"request_info too large to batch", true, "Unary", maxSend - rpc.BatchMaxBytes, 0, 1, false},
		{"unknown method", true, "Other", 100, 0, 0, false},
	} {
		tun := newTunnel(New(nil, 4), 1, d, &sendLog{})
		tun.maxSend = maxSend
		tun.out.Batches = tc.batches
		tt := tun.target(info(tc.method), tc.infoSize, tc.whole)
		if tt.messages != tc.wantMessages || tt.hold != tc.wantHold {
			t.Errorf("%s: %d messages at once, hold %v; want %d, %v", tc.name, tt.messages, tt.hold, tc.wantMessages, tc.wantHold)
		}
	}
}
