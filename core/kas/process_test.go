package kas_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/internal/procs"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
	"github.com/tunnelbench/tunnelbench/internal/testredis"
)

// TestSeparateProcesses runs what a user runs: two kas processes sharing Redis, one agentk connected to
// the first, and a call entering at the second.
func TestSeparateProcesses(t *testing.T) {
	rs := testredis.Start(t)
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(secret, []byte(strings.Repeat("s", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokens, []byte("# agents\n1=agent-one-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kasBin, agentBin := procs.Bin(t, "kas"), procs.Bin(t, "agentk")
	type kasAddrs struct{ agent, api string }
	var ks []kasAddrs
	var kp []*procs.Proc
	for range 2 {
		a := kasAddrs{agent: procs.FreeAddr(t), api: procs.FreeAddr(t)}
		kp = append(kp, procs.Start(t, kasBin,
			"--agent-listen", a.agent, "--api-listen", a.api, "--private-listen", procs.FreeAddr(t), "--metrics-listen", procs.FreeAddr(t),
			"--http-listen", procs.FreeAddr(t),
			"--agent-tokens-file", tokens, "--dev", "--private-api-secret-file", secret, "--redis-address", rs.Addr(),
			"--tunnel-find-timeout", "5s", "--tracker-refresh-period", "1s", "--tracker-ttl", "3s"))
		ks = append(ks, a)
	}
	ap := procs.Start(t, agentBin, "--kas-address", ks[0].agent, "--token", "agent-one-token")

	conn, err := grpc.NewClient(ks[1].api, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var msg string
	testenv.Eventually(t, 30*time.Second, func() bool {
		resp, err := demo.NewDemoClient(conn).Echo(testenv.AgentCtx(testCtx(t), 1), &demo.EchoRequest{Message: "two hops"})
		msg = resp.GetMessage()
		return err == nil
	}, "no call through the second kas succeeded; kas 1:\n%s\nkas 2:\n%s\nagentk:\n%s", kp[0].Output(), kp[1].Output(), ap.Output())
	if msg != "two hops" {
		t.Fatalf("echo %q", msg)
	}
	// Health through both hops too: a standard tool's view.
	if _, err := testgrpc.NewTestServiceClient(conn).EmptyCall(testenv.AgentCtx(testCtx(t), 1), &testpb.Empty{}); err == nil {
		t.Fatal("a service the agent does not serve answered")
	}
	for i, p := range append(kp, ap) {
		if err := p.Stop(15 * time.Second); err != nil {
			t.Fatalf("process %d did not stop cleanly on SIGTERM: %v\n%s", i, err, p.Output())
		}
	}
}
