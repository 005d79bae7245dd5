package kas_test

import (
	"log/slog"
	"os"
	"testing"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

func TestTmpDebugThousands(t *testing.T) {
	const calls = 2000
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := testenv.Start(t, testenv.Options{Agent: func(id int64, c *tunclient.Config) { oneTunnel(id, c); c.Log = log.With("side", "agent") },
		Kas: func(c *kas.Config) { c.Log = log.With("side", "kas") }})
	c := testgrpc.NewTestServiceClient(e.Public)
	before := e.Kas.Registry().Counts()
	for i := range calls {
		if err := reuseCall(testCtx(t), c, i); err != nil {
			t.Fatalf("call %d (kind %d): %v", i, i%int(reuseKinds), err)
		}
		if opened := e.Kas.Registry().Counts().TunnelsOpened - before.TunnelsOpened; opened != 0 {
			t.Fatalf("after call %d (kind %d): %d tunnels opened", i, i%int(reuseKinds), opened)
		}
	}
}
