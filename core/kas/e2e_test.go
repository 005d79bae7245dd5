package kas_test

import (
	"context"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

func TestSmoke(t *testing.T) {
	for _, tr := range []testenv.Transport{testenv.TCP, testenv.Bufconn} {
		t.Run(string(tr), func(t *testing.T) {
			e := testenv.Start(t, testenv.Options{Transport: tr})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for name, conn := range map[string]interface {
				testgrpc.TestServiceClient
			}{"public": testgrpc.NewTestServiceClient(e.Public), "internal": testgrpc.NewTestServiceClient(e.Kas.InternalConn())} {
				resp, err := conn.UnaryCall(testenv.AgentCtx(ctx, 1), &testpb.SimpleRequest{ResponseSize: 100})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if len(resp.GetPayload().GetBody()) != 100 {
					t.Fatalf("%s: got %d bytes", name, len(resp.GetPayload().GetBody()))
				}
			}
		})
	}
}
