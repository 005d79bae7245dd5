package kas_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/internal/procs"
	"github.com/tunnelbench/tunnelbench/internal/testcerts"
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

// TestSecureStartAsAUserWould starts kas and agentk the way the README's secure start does (TLS, mutual
// TLS for the agent, tokens in files) and calls in as a new user would: without TLS, with a wrong token,
// with a token for another agent, and right.
func TestSecureStartAsAUserWould(t *testing.T) {
	certs := testcerts.New(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	agents := write("agents.txt", "# id=token\n1=agent-one-secret\n")
	callers := write("callers.txt", "# agent ids=token\n1=caller-one-secret\n2=caller-two-secret\n")
	agentToken := write("agent-token.txt", "agent-one-secret\n")
	kasBin, agentBin := procs.Bin(t, "kas"), procs.Bin(t, "agentk")

	// The mistakes first: no caller tokens, and dev mode beyond loopback, each a one-line refusal.
	for _, args := range [][]string{
		{"--agent-tokens-file", agents},
		{"--agent-tokens-file", agents, "--dev", "--api-listen", "0.0.0.0:0"},
	} {
		out, err := exec.Command(kasBin, args...).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || strings.Count(string(out), "\n") != 1 {
			t.Errorf("kas %v: %v, output %q; want exit code 2 and one line", args, err, out)
		}
	}

	api, agentAPI, httpAddr := procs.FreeAddr(t), procs.FreeAddr(t), procs.FreeAddr(t)
	kp := procs.Start(t, kasBin, "--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey, "--agent-ca-file", certs.CAFile,
		"--agent-tokens-file", agents, "--caller-tokens-file", callers,
		"--agent-listen", agentAPI, "--api-listen", api, "--http-listen", httpAddr, "--private-listen", "", "--metrics-listen", procs.FreeAddr(t))
	ap := procs.Start(t, agentBin, "--kas-address", agentAPI, "--kas-ca-file", certs.CAFile, "--token-file", agentToken,
		"--tls-cert-file", certs.ClientCert, "--tls-key-file", certs.ClientKey)

	conn, err := grpc.NewClient(api, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: certs.Pool, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	echo := func(token string) error {
		ctx := metadata.AppendToOutgoingContext(testenv.AgentCtx(testCtx(t), 1), "authorization", "Bearer "+token)
		_, err := demo.NewDemoClient(conn).Echo(ctx, &demo.EchoRequest{Message: "hi"})
		return err
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return echo("caller-one-secret") == nil },
		"no call through the secure kas succeeded; kas:\n%s\nagentk:\n%s", kp.Output(), ap.Output())
	if err := echo("caller-guess"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("wrong caller token: %v, want Unauthenticated", err)
	}
	if err := echo("caller-two-secret"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("another agent's caller token: %v, want PermissionDenied", err)
	}
	plain, err := grpc.NewClient(api, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(testenv.AgentCtx(testCtx(t), 1), "authorization", "Bearer caller-one-secret"), 5*time.Second)
	defer cancel()
	if _, err := demo.NewDemoClient(plain).Echo(ctx, &demo.EchoRequest{Message: "hi"}); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext caller: %v, want Unavailable", err)
	}
	for name, out := range map[string]string{"kas": kp.Output(), "agentk": ap.Output()} {
		for _, secret := range []string{"agent-one-secret", "caller-one-secret", "caller-two-secret"} {
			if strings.Contains(out, secret) {
				t.Fatalf("%s logged a token:\n%s", name, out)
			}
		}
	}
	if strings.Contains(kp.Output(), "plaintext") || strings.Contains(ap.Output(), "plaintext") {
		t.Errorf("a secure start warns about plaintext:\nkas:\n%s\nagentk:\n%s", kp.Output(), ap.Output())
	}
}
