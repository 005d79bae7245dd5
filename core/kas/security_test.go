package kas_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
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

	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tlsfiles"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/internal/testcerts"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

// Caller tokens of the secure kas: one team reaches agent 1 only, operations reach every agent.
const (
	teamToken = "caller-secret-team-one"
	opsToken  = "caller-secret-ops"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type secureEnv struct {
	*testenv.Env
	certs *testcerts.Set
	log   *lockedBuffer
	// https is an HTTP client that trusts the test CA.
	https *http.Client
}

// startSecure starts a kas with TLS on every listener, mutual TLS for agents and caller tokens, and two
// agents that each serve HTTP as well.
func startSecure(t *testing.T) *secureEnv {
	certs := testcerts.New(t)
	callers, err := auth.NewStaticCallerTokens(map[string][]int64{teamToken: {1}, opsToken: nil})
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tlsfiles.NewReloader(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What the agent's upstream sees: kas's caller token must not be among it.
		fmt.Fprintf(w, "upstream saw %s authorization=%q", r.URL.Path, r.Header.Get("Authorization"))
	}))
	t.Cleanup(upstream.Close)
	upURL, _ := url.Parse(upstream.URL)
	log := &lockedBuffer{}
	e := testenv.Start(t, testenv.Options{
		Transport: testenv.TCP,
		Agents:    2,
		Kas: func(c *kas.Config) {
			c.Dev = false
			c.Callers = callers
			c.TLS = &kas.TLSConfig{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, AgentCAFile: certs.CAFile}
			c.HTTPListen = "127.0.0.1:0"
			c.Log = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		},
		Register: func(_ int64, a *tunclient.Agent) {
			up, err := httptunnel.Register(a, upURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(up.Close)
		},
		AgentDial:  []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsfiles.Client(certs.Pool, "", clientCert)))},
		CallerDial: []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsfiles.Client(certs.Pool, "", nil)))},
	})
	tr := &http.Transport{TLSClientConfig: tlsfiles.Client(certs.Pool, "", nil)}
	t.Cleanup(tr.CloseIdleConnections)
	return &secureEnv{Env: e, certs: certs, log: log, https: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

func callerCtxWith(t *testing.T, agentID int64, token string) context.Context {
	ctx := testenv.AgentCtx(testCtx(t), agentID)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return ctx
}

func wantStatus(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("%s: %v, want %s saying %q", what, err, code, msg)
	}
}

func TestSecureKasAuthorizesCallers(t *testing.T) {
	e := startSecure(t)
	c := testgrpc.NewTestServiceClient(e.Public)

	if _, err := c.EmptyCall(callerCtxWith(t, 1, teamToken), &testpb.Empty{}); err != nil {
		t.Fatalf("the team's token to its agent: %v", err)
	}
	for id := int64(1); id <= 2; id++ {
		if _, err := c.EmptyCall(callerCtxWith(t, id, opsToken), &testpb.Empty{}); err != nil {
			t.Fatalf("the operations token to agent %d: %v", id, err)
		}
	}
	_, err := c.EmptyCall(callerCtxWith(t, 1, ""), &testpb.Empty{})
	wantStatus(t, "no token", err, codes.Unauthenticated, "missing authorization")
	_, err = c.EmptyCall(callerCtxWith(t, 1, "caller-secret-guess"), &testpb.Empty{})
	wantStatus(t, "wrong token", err, codes.Unauthenticated, "invalid caller token")
	_, err = c.EmptyCall(callerCtxWith(t, 1, teamToken[:len(teamToken)-1]), &testpb.Empty{})
	wantStatus(t, "a prefix of a token", err, codes.Unauthenticated, "invalid caller token")
	_, err = c.EmptyCall(callerCtxWith(t, 2, teamToken), &testpb.Empty{})
	wantStatus(t, "another team's agent", err, codes.PermissionDenied, "may not reach agent 2")

	// The caller's token is kas's business: the agent's service never sees it.
	for _, s := range e.Agents[1].Service.Seen() {
		if v := s.Metadata.Get("authorization"); len(v) > 0 {
			t.Fatalf("the agent saw authorization %q", v)
		}
	}

	// The same rules on the HTTP listener.
	httpURL := func(id int64) string { return fmt.Sprintf("https://%s/agents/%d/hello", e.Kas.Addrs().HTTP, id) }
	for _, c := range []struct {
		name, token string
		agent       int64
		code        int
		body        string
	}{
		{"no token", "", 1, http.StatusUnauthorized, "missing caller token"},
		{"wrong token", "caller-secret-guess", 1, http.StatusUnauthorized, "invalid caller token"},
		{"another team's agent", teamToken, 2, http.StatusForbidden, "may not reach agent 2"},
		{"the team's agent", teamToken, 1, http.StatusOK, `upstream saw /hello authorization=""`},
		{"operations", opsToken, 2, http.StatusOK, `upstream saw /hello authorization=""`},
	} {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, httpURL(c.agent), nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := e.https.Do(req)
		if err != nil {
			t.Fatalf("HTTP %s: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.body) {
			t.Errorf("HTTP %s: %d %q, want %d saying %q", c.name, resp.StatusCode, body, c.code, c.body)
		}
	}
	// A path that could leave the upstream's base path is the caller's bad request, whatever its token
	// may reach: a 400 that names the problem, not a 403 for an agent id that did not parse.
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, fmt.Sprintf("https://%s/agents/1/%%2e%%2e/secret", e.Kas.Addrs().HTTP), nil)
	req.Header.Set("Authorization", "Bearer "+teamToken)
	resp, err := e.https.Do(req)
	if err != nil {
		t.Fatalf("HTTP traversal: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `path segment "%2e%2e" is a dot segment`) {
		t.Errorf("HTTP traversal: %d %q, want 400 naming the dot segment", resp.StatusCode, body)
	}

	for _, secret := range []string{teamToken, opsToken, testenv.Token(1), testenv.Token(2)} {
		if strings.Contains(e.log.String(), secret) {
			t.Fatalf("kas logged a token:\n%s", e.log.String())
		}
	}
	// Refused callers are logged once per reason and listener within the window: the two wrong tokens
	// above make one line.
	for _, listener := range []string{`listener="public API"`, "listener=HTTP"} {
		for _, reason := range []string{"no caller token", "invalid caller token", "agent not allowed for the caller token"} {
			n := 0
			for _, line := range strings.Split(e.log.String(), "\n") {
				if strings.Contains(line, `msg="refused caller"`) && strings.Contains(line, listener) && strings.Contains(line, `reason="`+reason+`"`) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d lines for %s refused on %s, want 1:\n%s", n, reason, listener, e.log.String())
			}
		}
	}
	if !strings.Contains(e.log.String(), "tls=true") || !strings.Contains(e.log.String(), "caller_auth=true") {
		t.Errorf("kas's start line does not say it runs with TLS and caller tokens:\n%s", e.log.String())
	}
}

func TestSecureKasRefusesPlaintext(t *testing.T) {
	e := startSecure(t)
	addrs := e.Kas.Addrs()
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()

	// A plaintext gRPC caller never gets as far as a status from kas: the TLS handshake fails.
	plain, err := grpc.NewClient(addrs.API.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, err = testgrpc.NewTestServiceClient(plain).EmptyCall(metadata.AppendToOutgoingContext(testenv.AgentCtx(ctx, 1), "authorization", "Bearer "+opsToken), &testpb.Empty{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext caller: %v, want Unavailable", err)
	}

	// A plaintext agent, even with a valid token, cannot open a tunnel.
	conn, err := tunclient.DialKas(addrs.Agent.String(), testenv.Token(1))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := connectOnce(ctx, conn); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext agent: %v, want Unavailable", err)
	}

	// Plain HTTP to the HTTPS listener gets Go's 400 and nothing reaches an agent.
	resp, err := http.Get("http://" + addrs.HTTP.String() + "/agents/1/hello")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP: %d, want 400", resp.StatusCode)
	}
}

func TestSecureKasAuthenticatesAgents(t *testing.T) {
	e := startSecure(t)
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	target := e.Kas.Addrs().Agent.String()
	clientCert, err := tlsfiles.NewReloader(e.certs.ClientCert, e.certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}

	// Mutual TLS: without a client certificate the handshake fails whatever the token.
	noCert, err := tunclient.DialKasTLS(target, testenv.Token(1), tlsfiles.Client(e.certs.Pool, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer noCert.Close()
	if _, err := connectOnce(ctx, noCert); status.Code(err) != codes.Unavailable {
		t.Errorf("agent without a client certificate: %v, want Unavailable", err)
	}

	// With the certificate, the token still decides.
	wrongToken, err := tunclient.DialKasTLS(target, "token-guess", tlsfiles.Client(e.certs.Pool, "", clientCert))
	if err != nil {
		t.Fatal(err)
	}
	defer wrongToken.Close()
	_, err = connectOnce(ctx, wrongToken)
	wantStatus(t, "wrong agent token", err, codes.Unauthenticated, "invalid agent token")

	// An agent that does not trust kas's certificate does not send its token at all.
	untrusting, err := tunclient.DialKasTLS(target, testenv.Token(1), &tls.Config{MinVersion: tls.VersionTLS12, GetClientCertificate: clientCert.GetClientCertificate})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close()
	if _, err := connectOnce(ctx, untrusting); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("agent that does not trust kas: %v, want Unavailable about the certificate", err)
	}
}

// connectOnce opens a tunnel and waits for kas's first answer, which a refused agent gets as an error.
func connectOnce(ctx context.Context, conn *grpc.ClientConn) (*rpc.ConnectResponse, error) {
	stream, err := rpc.NewReverseTunnelClient(conn).Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Descriptor_{Descriptor_: &rpc.Descriptor{}}}); err != nil && err != io.EOF {
		return nil, err
	}
	return stream.Recv()
}

func TestSecureKasReloadsItsCertificate(t *testing.T) {
	e := startSecure(t)
	serial := func() string {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.Kas.Addrs().API.String(), tlsfiles.Client(e.certs.Pool, "", nil))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	next := e.certs.RotateServer(t).String()
	if next == before {
		t.Fatal("the rotated certificate has the same serial")
	}
	testenv.Eventually(t, 10*time.Second, func() bool { return serial() == next }, "kas still serves the old certificate after its files changed")

	// Tunnels and calls carry on over the new certificate.
	if _, err := testgrpc.NewTestServiceClient(e.Public).EmptyCall(callerCtxWith(t, 1, teamToken), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
}

// TestTLSReplicas: replicas with TLS find each other as grpcs:// peers, verified with the peer CA, and
// route calls between them.
func TestTLSReplicas(t *testing.T) {
	certs := testcerts.New(t)
	clientCert, err := tlsfiles.NewReloader(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{
		Kas: func(_ int, c *kas.Config) {
			c.TLS = &kas.TLSConfig{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, AgentCAFile: certs.CAFile, PeerCAFile: certs.CAFile}
		},
		AgentDial:  []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsfiles.Client(certs.Pool, "", clientCert)))},
		CallerDial: []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsfiles.Client(certs.Pool, "", nil)))},
	})
	c.StartAgent(1, 0)
	resp, err := testgrpc.NewTestServiceClient(c.Public[1]).UnaryCall(testenv.AgentCtx(testCtx(t), 1), &testpb.SimpleRequest{ResponseSize: 10})
	if err != nil {
		t.Fatalf("a call entering at the second replica: %v", err)
	}
	if len(resp.GetPayload().GetBody()) != 10 {
		t.Fatalf("response %v", resp)
	}
}
