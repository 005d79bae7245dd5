package kas_test

import (
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/kas"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
	"github.com/tunnelbench/tunnelbench/internal/testsvc"
)

// checkRoutedCalls makes unary and streaming calls for agent 1 through c and checks metadata, status
// and what reached the service.
func checkRoutedCalls(t *testing.T, name string, c testgrpc.TestServiceClient, svc *testsvc.Server) {
	t.Helper()
	ctx := testenv.AgentCtx(testCtx(t), 1, testsvc.EchoInitialKey, "hi", "authorization", "Bearer caller", "kas-hop-x", "no", "x-keep", "yes")
	var hdr metadata.MD
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 77}, grpc.Header(&hdr))
	if err != nil {
		t.Fatalf("%s unary: %v", name, err)
	}
	if len(resp.GetPayload().GetBody()) != 77 || hdr.Get(testsvc.EchoInitialKey)[0] != "hi" {
		t.Fatalf("%s unary: %d bytes, header %v", name, len(resp.GetPayload().GetBody()), hdr)
	}
	_, err = c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.ResourceExhausted), Message: "zu viel"}})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != "zu viel" || len(st.Details()) != 1 {
		t.Fatalf("%s status: %v", name, err)
	}
	bidi, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if err := bidi.Send(&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: int32(i)}}}); err != nil {
			t.Fatal(err)
		}
		if m, err := bidi.Recv(); err != nil || len(m.GetPayload().GetBody()) != i {
			t.Fatalf("%s ping-pong %d: %v", name, i, err)
		}
	}
	_ = bidi.CloseSend()
	if _, err := bidi.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("%s bidi end: %v", name, err)
	}
	for _, s := range svc.Seen() {
		for k := range s.Metadata {
			if strings.HasPrefix(k, rpc.RoutingHopPrefix) || k == "authorization" {
				t.Fatalf("%s: %q reached the agent", name, k)
			}
		}
		if s.Metadata.Get("x-keep")[0] != "yes" {
			t.Fatalf("%s: x-keep lost", name)
		}
	}
}

func TestTwoHopRouting(t *testing.T) {
	c := testenv.StartCluster(t, 3, testenv.ClusterOptions{})
	ae := c.StartAgent(1, 2) // connected to the third kas only
	for i, name := range []string{"kas1", "kas2"} {
		checkRoutedCalls(t, name+" public", testgrpc.NewTestServiceClient(c.Public[i]), ae.Service)
		checkRoutedCalls(t, name+" internal", testgrpc.NewTestServiceClient(c.Kas[i].InternalConn()), ae.Service)
	}
	for i := range 2 {
		if st := c.Kas[i].Registry().Stats(); st.IdleTunnels != 0 || st.BusyTunnels != 0 {
			t.Fatalf("kas %d holds tunnels: %+v", i, st)
		}
	}
}

func TestLosersGiveTunnelsBack(t *testing.T) {
	c := testenv.StartCluster(t, 3, testenv.ClusterOptions{})
	// Agent 1 runs twice: one instance on kas 2, one on kas 3. Calls enter at kas 1, which holds none.
	// Slow calls outnumber the idle tunnels, so calls wait at both gateways at once and one of the two
	// gateways that become ready for a call loses.
	c.StartAgent(1, 1)
	c.StartAgent(1, 2)
	client := testgrpc.NewTestServiceClient(c.Public[0])
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := slowCall(testenv.AgentCtx(testCtx(t), 1), client, 50*time.Millisecond); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Every tunnel is idle again or was used; none is stuck found by a gateway that lost.
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, c2 := c.Kas[1].Registry().Stats(), c.Kas[2].Registry().Stats()
		return b.BusyTunnels == 0 && c2.BusyTunnels == 0 && b.WaitingCalls == 0 && c2.WaitingCalls == 0
	}, "tunnels not given back: %+v %+v", c.Kas[1].Registry().Stats(), c.Kas[2].Registry().Stats())
}

func TestTunnelDyingBeforeStartStreamingMovesTheCall(t *testing.T) {
	// The first gateway that becomes ready loses its tunnel before start_streaming arrives.
	var killed atomic.Int32
	hook := func(agentID int64, kill func()) {
		if killed.CompareAndSwap(0, 1) {
			kill()
		}
	}
	c := testenv.StartCluster(t, 3, testenv.ClusterOptions{Kas: func(_ int, c *kas.Config) { c.GatewayTunnelReadyHook = hook }})
	c.StartAgent(1, 1)
	c.StartAgent(1, 2)
	resp, err := testgrpc.NewTestServiceClient(c.Public[0]).UnaryCall(testenv.AgentCtx(testCtx(t), 1), &testpb.SimpleRequest{ResponseSize: 5})
	if err != nil {
		t.Fatalf("call failed although another gateway had a tunnel: %v", err)
	}
	if len(resp.GetPayload().GetBody()) != 5 || killed.Load() != 1 {
		t.Fatalf("payload %d, killed %d", len(resp.GetPayload().GetBody()), killed.Load())
	}
}

func TestPrivateAPIRefusesBadTokens(t *testing.T) {
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{})
	c.StartAgent(1, 1)
	conn, err := grpc.NewClient(c.Kas[1].Addrs().Private.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sign := func(secret []byte, iss, aud string, exp time.Time) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
			Issuer: iss, Audience: jwt.ClaimStrings{aud}, IssuedAt: jwt.NewNumericDate(time.Now().Add(-time.Minute)), ExpiresAt: jwt.NewNumericDate(exp),
		}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := time.Now().Add(5 * time.Second)
	cases := map[string]string{
		"none":            "",
		"garbage":         "Bearer not-a-jwt",
		"wrong secret":    "Bearer " + sign([]byte(strings.Repeat("x", 32)), auth.PrivateTokenIssuer, auth.PrivateTokenAudience, good),
		"wrong issuer":    "Bearer " + sign(c.Secret, "someone", auth.PrivateTokenAudience, good),
		"wrong audience":  "Bearer " + sign(c.Secret, auth.PrivateTokenIssuer, "other", good),
		"expired":         "Bearer " + sign(c.Secret, auth.PrivateTokenIssuer, auth.PrivateTokenAudience, time.Now().Add(-time.Minute)),
		"agent token too": "Bearer " + testenv.Token(1),
	}
	for name, authz := range cases {
		md := metadata.Pairs(rpc.RoutingAgentIDMetadataKey, "1")
		if authz != "" {
			md.Set("authorization", authz)
		}
		_, err := testgrpc.NewTestServiceClient(conn).EmptyCall(metadata.NewOutgoingContext(testCtx(t), md), &testpb.Empty{})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
	}
	// A token signed with the shared secret is accepted: the call reaches the agent.
	md := metadata.Pairs(rpc.RoutingAgentIDMetadataKey, "1", "authorization", "Bearer "+sign(c.Secret, auth.PrivateTokenIssuer, auth.PrivateTokenAudience, good))
	ctx := metadata.NewOutgoingContext(testCtx(t), md)
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/grpc.testing.TestService/EmptyCall")
	if err != nil {
		t.Fatal(err)
	}
	var first testpb.Empty
	if err := cs.RecvMsg(&first); err != nil {
		t.Fatalf("a valid token was refused: %v", err)
	}
}
