package kas_test

import (
	"context"
	"testing"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// TestPublicAPIHoldsPingAcks: a caller's gRPC client on default windows probes the bandwidth with a PING
// on nearly every call's answer, and kas, which answers later than at once, holds each ACK for the call's
// answer (core/grpctool/pingack), over plaintext and over TLS. Every call still answers.
func TestPublicAPIHoldsPingAcks(t *testing.T) {
	t.Run("plaintext", func(t *testing.T) {
		e := testenv.Start(t, testenv.Options{})
		checkPingAcksHeld(t, e, func() context.Context { return testenv.AgentCtx(testCtx(t), 1) })
	})
	t.Run("TLS", func(t *testing.T) {
		e := startSecure(t)
		checkPingAcksHeld(t, e.Env, func() context.Context { return callerCtxWith(t, 1, teamToken) })
	})
}

func checkPingAcksHeld(t *testing.T, e *testenv.Env, ctx func() context.Context) {
	t.Helper()
	c := testgrpc.NewTestServiceClient(e.Public)
	const calls = 60
	for i := range calls {
		body := []byte{byte(i), 'x', 'y'}
		resp, err := c.UnaryCall(ctx(), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: body}, ResponseSize: 3})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(resp.GetPayload().GetBody()) != 3 {
			t.Fatalf("call %d answered %d bytes, want 3", i, len(resp.GetPayload().GetBody()))
		}
	}
	m := testenv.Scrape(t, e.Metrics)
	held := testenv.Value(m[kas.PublicPingAcksMetric+"_total"], "event", "held")
	alone := testenv.Value(m[kas.PublicPingAcksMetric+"_total"], "event", "alone")
	// gRPC-go's client probes on every call or every other one; under the race detector a call may take
	// longer than the hold, so only held ACKs are counted on.
	if held < calls/4 || alone > held {
		t.Errorf("%s: held %v, alone %v over %d calls; want at least %d held", kas.PublicPingAcksMetric, held, alone, calls, calls/4)
	}
}
