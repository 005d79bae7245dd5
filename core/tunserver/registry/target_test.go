package registry

import (
	"testing"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
)

// A call's request waits to leave as one batch only on a batched tunnel, for a method whose caller the
// agent said sends one request, and when the batch fits in a tunnel message whatever its request_info.
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
		name              string
		batches           bool
		method            string
		infoSize          int
		wantOne, wantHold bool
	}{
		{"batched, one request", true, "Unary", 100, true, true},
		{"batched, streaming requests", true, "Streaming", 100, false, false},
		{"not batched", false, "Unary", 100, true, false},
		{"request_info too large to batch", true, "Unary", maxSend - rpc.BatchMaxBytes, true, false},
		{"unknown method", true, "Other", 100, false, false},
	} {
		tun := newTunnel(New(nil, 4), 1, d, &sendLog{})
		tun.maxSend = maxSend
		tun.out.Batches = tc.batches
		tt := tun.target(info(tc.method), tc.infoSize)
		if tt.oneRequest != tc.wantOne || tt.hold != tc.wantHold {
			t.Errorf("%s: one request %v, hold %v; want %v, %v", tc.name, tt.oneRequest, tt.hold, tc.wantOne, tc.wantHold)
		}
	}
}
