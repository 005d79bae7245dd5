package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tunnelbench/tunnelbench/bench"
	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/internal/cli"
	"github.com/tunnelbench/tunnelbench/internal/testcerts"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

const benchCallerToken = "bench-caller-secret"

// startSecureKas starts a kas as a secure deployment runs it: TLS on every listener, mutual TLS for
// agents, callers with a token that may reach agent 1, and agent 1 serving the demo service.
func startSecureKas(t *testing.T) (*testenv.Env, *testcerts.Set) {
	t.Helper()
	certs := testcerts.New(t)
	callers, err := auth.NewStaticCallerTokens(map[string][]int64{benchCallerToken: {1}})
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tlsfiles.NewReloader(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	e := testenv.Start(t, testenv.Options{
		Transport: testenv.TCP,
		Kas: func(c *kas.Config) {
			c.Dev = false
			c.Callers = callers
			c.TLS = &kas.TLSConfig{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, AgentCAFile: certs.CAFile}
		},
		Register:   func(_ int64, a *tunclient.Agent) { demo.Register(a) },
		AgentDial:  []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsfiles.Client(certs.Pool, "", clientCert)))},
		CallerDial: []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsfiles.Client(certs.Pool, "", nil)))},
	})
	return e, certs
}

func writeSecret(t *testing.T, name, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// benchTarget runs tunnelbench bench --target in this process with a tiny matrix and returns its exit
// code, stdout and summary.
func benchTarget(t *testing.T, extra ...string) (int, string, *bench.Summary, string) {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"bench", "--shapes", "unary-64B", "--concurrency", "2", "--warmup", "1ms", "--duration", "200ms",
		"--rounds", "2", "--out", out}, extra...)
	var stdout, stderr bytes.Buffer
	code := cli.ExitCode("tunnelbench", run(ctx, args, &stdout, &stderr), &stderr)
	sum, err := bench.ReadSummary(out)
	if err != nil {
		t.Fatalf("%v: exit %d, no summary (%v):\n%s\n%s", args, code, err, stdout.String(), stderr.String())
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if strings.Contains(string(raw)+string(report)+stdout.String()+stderr.String(), benchCallerToken) {
		t.Fatalf("the caller token was written out")
	}
	return code, stdout.String() + stderr.String(), sum, string(report)
}

// TestBenchSecureTarget: bench --target reaches a kas with TLS and caller tokens through agentk's flag
// names; a wrong, a missing token and no TLS fail every case with the code kas answers, and the run
// exits 1.
func TestBenchSecureTarget(t *testing.T) {
	e, certs := startSecureKas(t)
	addr := e.Kas.Addrs().API.String()
	token := writeSecret(t, "caller-token.txt", benchCallerToken)

	code, out, sum, report := benchTarget(t, "--target", addr, "--kas-ca-file", certs.CAFile, "--kas-server-name", "localhost", "--token-file", token)
	if code != 0 {
		t.Fatalf("exit %d with the right settings:\n%s", code, out)
	}
	if len(sum.Cases) != 1 || sum.Cases[0].Path != string(bench.PathTunnelPublic) || sum.Cases[0].Errors != 0 || sum.Cases[0].Failed ||
		sum.Cases[0].CallsPerSec <= 0 || len(sum.Cases[0].Rounds) != 2 || sum.Cases[0].Spread == nil {
		t.Fatalf("cases %+v", sum.Cases)
	}
	want := bench.TargetSettings{Address: addr, Agent: 1, TLS: true, CAFile: certs.CAFile, ServerName: "localhost", CallerToken: true, TokenFile: token}
	if s := sum.Settings; s == nil || s.Topology != bench.TopologyTarget || s.Target == nil || *s.Target != want || s.Rounds != 2 || s.DurationS != 0.2 {
		t.Fatalf("settings %+v, target %+v; want %+v", s, s.Target, want)
	}
	for _, w := range []string{"Target: kas public API at `" + addr + "` over TLS (CA file `" + certs.CAFile + "`, server name `localhost`)",
		"with a caller token from `" + token + "`"} {
		if !strings.Contains(report, w) {
			t.Errorf("report.md lacks %q:\n%s", w, report)
		}
	}

	for _, tc := range []struct {
		name string
		args []string
		code string
	}{
		{"wrong token", []string{"--kas-ca-file", certs.CAFile, "--token-file", writeSecret(t, "wrong.txt", "not-a-caller")}, "Unauthenticated"},
		{"no token", []string{"--kas-ca-file", certs.CAFile}, "Unauthenticated"},
		{"no TLS", []string{"--token-file", token}, "Unavailable"},
	} {
		code, out, sum, report := benchTarget(t, append([]string{"--target", addr}, tc.args...)...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1:\n%s", tc.name, code, out)
		}
		c := sum.Cases[0]
		if !c.Failed || c.Calls == 0 || c.Errors != c.Calls || c.ErrorsByCode[tc.code] != c.Errors || c.CallsPerSec != 0 || c.BytesPerSec != 0 {
			t.Errorf("%s: case %s failed %v, %d calls, %d errors %v, calls/s %v, bytes/s %v; want every call %s and no throughput",
				tc.name, c.Name, c.Failed, c.Calls, c.Errors, c.ErrorsByCode, c.CallsPerSec, c.BytesPerSec, tc.code)
		}
		if !strings.Contains(out, "FAILED") || !strings.Contains(out, "("+tc.code+" ") || !strings.Contains(out, "1 case failed (errors by code above)") {
			t.Errorf("%s: the output does not show the failure by code:\n%s", tc.name, out)
		}
		if !strings.Contains(report, "| FAILED |") || !strings.Contains(report, "| "+tc.code+" ") {
			t.Errorf("%s: report.md does not show the failure by code:\n%s", tc.name, report)
		}
	}
}
