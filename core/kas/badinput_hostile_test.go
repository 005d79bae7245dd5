package kas_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/call"
)

// The hostile-client cases: inputs with which one party could cost another its tunnels, or make kas hold
// what it had not counted. Each failed before its fix.

// Fixture limits these cases drive to the edge.
const (
	badMaxTunnels = 30
	// badMaxWaitingAll is the kas-wide bound; badMaxWaiting (per agent) is below it.
	badMaxWaitingAll = 4
	badHandshake     = 300 * time.Millisecond
)

// badBigMD is request metadata of n bytes in one value, for agent id.
func badBigMD(id string, n int) metadata.MD {
	return badAgentMD(id, "x-big", strings.Repeat("m", n))
}

// badReuseDescriptor asks for a reusable tunnel.
func badReuseDescriptor() *rpc.ConnectRequest {
	d := badTestDescriptor()
	d.GetDescriptor_().Reuse = true
	return d
}

var badCallEnd = &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_CallEnd{CallEnd: &rpc.CallEnd{}}}

// badBatchDescriptor asks for a reusable tunnel and offers batches.
func badBatchDescriptor() *rpc.ConnectRequest {
	d := badReuseDescriptor()
	d.GetDescriptor_().Batches = true
	return d
}

func badBatch(msgs ...*rpc.ConnectRequest) *rpc.ConnectRequest {
	return &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Batch{Batch: &rpc.RequestBatch{Msgs: msgs}}}
}

// badBatchCase: an agent sends first on a routed call and breaks the protocol with it; the caller hears
// that the tunnel broke (callerSays) and the tunnel ends with code, saying says.
func badBatchCase(name string, desc func() *rpc.ConnectRequest, first *rpc.ConnectRequest, callerSays string, code codes.Code, says string) badCase {
	return badCase{
		name: name,
		run: func(t *testing.T, f *badFixture) badAnswer {
			s, _, call := f.routedWith(t, desc(), badEmptyCall, nil)
			if err := s.Send(first); err != nil {
				t.Fatal(err)
			}
			end := badTunnelEnd(s)
			badWantStatus(t, "caller", badWait(t, call, "the caller"), codes.Unavailable, callerSays, says)
			return badStatusOf(end)
		},
		code: code, says: []string{says},
	}
}

func badHostileCases() []badCase {
	return []badCase{
		// Batches are for tunnels whose agent offered them and whose kas took them; a batch holds the
		// messages of the protocol, never another batch or a descriptor.
		// What could make kas decode far more than it received (a batch in a batch, a descriptor in one,
		// more than rpc.MaxBatchMessages) is refused as it is decoded: gRPC calls that Internal.
		badBatchCase("agent/batch on a tunnel without batches", badReuseDescriptor, badBatch(badHeaderMsg, badTrailerMsg, badCallEnd),
			"broke the tunnel protocol", codes.InvalidArgument, "batch is not allowed after descriptor"),
		badBatchCase("agent/batch inside a batch", badBatchDescriptor, badBatch(badBatch(badHeaderMsg)),
			"tunnel to agent", codes.Internal, "a batch or a descriptor inside a batch"),
		badBatchCase("agent/descriptor inside a batch", badBatchDescriptor, badBatch(badHeaderMsg, badTestDescriptor()),
			"tunnel to agent", codes.Internal, "a batch or a descriptor inside a batch"),
		badBatchCase("agent/batch of more messages than a batch may hold", badBatchDescriptor, badBatch(slices.Repeat([]*rpc.ConnectRequest{badHeaderMsg}, rpc.MaxBatchMessages+1)...),
			"tunnel to agent", codes.Internal, "more than 64 messages"),
		{
			// An agent that ends a call it did not answer: the caller learns the agent broke the protocol.
			name: "agent/reusable tunnel: call_end before the answer",
			run: func(t *testing.T, f *badFixture) badAnswer {
				s, _, call := f.routedWith(t, badReuseDescriptor(), badEmptyCall, nil)
				if h, err := s.Header(); err != nil || len(h.Get(rpc.TunnelReuseHeaderKey)) == 0 {
					t.Errorf("kas did not offer reuse: %v %v", h, err)
				}
				if err := s.Send(badCallEnd); err != nil {
					t.Fatal(err)
				}
				end := badTunnelEnd(s)
				badWantStatus(t, "caller", badWait(t, call, "the caller"), codes.Unavailable, "broke the tunnel protocol", "call_end before the answer")
				return badStatusOf(end)
			},
			code: codes.InvalidArgument, says: []string{"call_end before the answer's trailer or error"},
		},
		{
			// A call_end on a single-use tunnel is not part of its protocol.
			name: "agent/single-use tunnel: call_end",
			run: func(t *testing.T, f *badFixture) badAnswer {
				s, _, call := f.routed(t, badEmptyCall, nil)
				for _, m := range []*rpc.ConnectRequest{badHeaderMsg, badTrailerMsg, badCallEnd} {
					if s.Send(m) != nil {
						break
					}
				}
				end := badTunnelEnd(s)
				<-call
				return badStatusOf(end)
			},
			code: codes.InvalidArgument, says: []string{"call_end is not allowed after trailer"},
		},
		{
			// Used to end every tunnel of the agent in turn (each failed to carry the request info) and make
			// the agent back off for seconds, while the caller got DeadlineExceeded.
			name: "public/metadata far over a tunnel message",
			run:  badPublicCall(badEmptyCall, badBigMD("1", kas.DefaultMaxMessageSize+(128<<10)), nil),
			code: codes.ResourceExhausted, says: []string{"request metadata is", "--max-metadata-bytes"},
		},
		{
			name: "public/metadata over the limit",
			run:  badPublicCall(badEmptyCall, badBigMD("1", call.DefaultMaxMetadataBytes), nil),
			code: codes.ResourceExhausted, says: []string{"--max-metadata-bytes", fmt.Sprint(call.DefaultMaxMetadataBytes)},
		},
		{
			name: "in-process/metadata over the limit",
			run: func(t *testing.T, f *badFixture) badAnswer {
				_, err := badRawCall(badCtx(t), f.e.Kas.InternalConn(), badEmptyCall, badBigMD("1", 2*call.DefaultMaxMetadataBytes), nil)
				return badStatusOf(err)
			},
			code: codes.ResourceExhausted, says: []string{"--max-metadata-bytes"},
		},
		{
			name: "private/valid JWT, metadata over the limit",
			run:  badPrivateCall(badValidJWT, false, badBigMD("1", 2*call.DefaultMaxMetadataBytes), nil),
			code: codes.ResourceExhausted, says: []string{"--max-metadata-bytes"},
		},
		{
			name: "public/too many calls waiting on this kas",
			run: func(t *testing.T, f *badFixture) badAnswer {
				// Each call is for another absent agent: the per-agent bound never bites.
				conn := badDial(t, f.e.Kas.Addrs().API)
				ctx := badCtx(t)
				waiting := make(chan error, badMaxWaitingAll)
				for i := range badMaxWaitingAll {
					go func() {
						_, err := badRawCall(ctx, conn, badEmptyCall, badAgentMD(fmt.Sprint(200+i)), nil)
						waiting <- err
					}()
				}
				badWaitFor(t, "the calls to wait", func() error {
					if st := f.e.Kas.Registry().Stats(); st.WaitingCalls != badMaxWaitingAll {
						return fmt.Errorf("registry %+v", st)
					}
					return nil
				})
				_, err := badRawCall(ctx, conn, badEmptyCall, badAgentMD("299"), nil)
				for range badMaxWaitingAll {
					badWantStatus(t, "waiting call", badWait(t, waiting, "a waiting call"), codes.DeadlineExceeded, "no tunnel to agent")
				}
				return badStatusOf(err)
			},
			code: codes.ResourceExhausted, says: []string{"--max-waiting-calls)", fmt.Sprint(badMaxWaitingAll)},
		},
		{
			name: "agent/no descriptor within the handshake timeout",
			run: func(t *testing.T, f *badFixture) badAnswer {
				s, _ := f.tunnel(t, badBearer(badRawAgent))
				return badStatusOf(badTunnelEnd(s))
			},
			code: codes.DeadlineExceeded, says: []string{"no descriptor within", "--tunnel-handshake-timeout"},
		},
		{
			// Streams that never send a descriptor used to be held without bound and uncounted.
			name: "agent/silent streams count against the tunnel limit",
			run: func(t *testing.T, f *badFixture) badAnswer {
				rc := badDial(t, f.e.Kas.Addrs().Agent)
				streams := make([]rpc.ReverseTunnel_ConnectClient, badMaxTunnels)
				for i := range streams {
					s, err := rpc.NewReverseTunnelClient(rc).Connect(metadata.AppendToOutgoingContext(badCtx(t), "authorization", badBearer(badRawAgent)))
					if err != nil {
						t.Fatal(err)
					}
					streams[i] = s
				}
				badWaitFor(t, "kas to admit the silent streams", func() error {
					if st := f.e.Kas.Registry().Stats(); st.PendingTunnels != badMaxTunnels {
						return fmt.Errorf("registry %+v", st)
					}
					return nil
				})
				s, err := rpc.NewReverseTunnelClient(rc).Connect(metadata.AppendToOutgoingContext(badCtx(t), "authorization", badBearer(badRawAgent)))
				if err != nil {
					t.Fatal(err)
				}
				extra := badTunnelEnd(s)
				for _, s := range streams { // the admitted ones end at their handshake timeout
					badWantStatus(t, "silent stream", badTunnelEnd(s), codes.DeadlineExceeded, "no descriptor within")
				}
				return badStatusOf(extra)
			},
			code: codes.ResourceExhausted, says: []string{fmt.Sprintf("agent %d already has %d tunnels", badRawAgent, badMaxTunnels), "still in their handshake", "--max-tunnels-per-agent"},
		},
		{
			// Over the agent server's own receive bound (the message limit plus the envelope's room): gRPC
			// refuses it before kas sees it. It used to reach the caller as Unavailable, inviting retries.
			name: "agent/response message over the envelope",
			run: func(t *testing.T, f *badFixture) badAnswer {
				s, _, call := f.routed(t, badEmptyCall, nil)
				big := &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Message{Message: &rpc.Message{Data: make([]byte, kas.DefaultMaxMessageSize+(128<<10))}}}
				for _, m := range []*rpc.ConnectRequest{badHeaderMsg, big} {
					if err := s.Send(m); err != nil {
						break
					}
				}
				badWantStatus(t, "agent", badTunnelEnd(s), codes.ResourceExhausted, "larger than max")
				return badStatusOf(badWait(t, call, "the caller"))
			},
			code: codes.ResourceExhausted, says: []string{fmt.Sprintf("agent %d sent a response message larger than the limit (--max-message-size)", badRawAgent)},
		},
		{
			// kas refuses a header that is not valid metadata; the agent used to be told that the caller
			// went away although the caller was still there.
			name: "agent/header that is not valid metadata",
			run: func(t *testing.T, f *badFixture) badAnswer {
				s, _, call := f.routed(t, badEmptyCall, nil)
				bad := &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Header{Header: &rpc.Header{Meta: map[string]*rpc.Values{"x-bad": {Value: [][]byte{[]byte("a\x01b")}}}}}}
				if err := s.Send(bad); err != nil {
					t.Fatal(err)
				}
				badWantStatus(t, "caller", badWait(t, call, "the caller"), codes.Internal, "the agent's response header is not valid gRPC metadata")
				return badStatusOf(badTunnelEnd(s))
			},
			code: codes.Internal, says: []string{"kas refused the answer", "not valid gRPC metadata"},
		},
	}
}
