package rpc

import (
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type trailerQueue struct {
	clientQueue
	trailer metadata.MD
}

func (q *trailerQueue) Trailer() metadata.MD { return q.trailer }

// An EndTunnel cancels the stream and ends it for the agent's code exactly as kas's handler would have:
// its status (io.EOF for none) from every Recv after it, its reason in the trailer; messages before
// it, and a stream that ends without one, pass unchanged.
func TestEndingClientEndsAsKasAsked(t *testing.T) {
	info := &ConnectResponse{Msg: &ConnectResponse_RequestInfo{RequestInfo: &RequestInfo{}}}
	streamEnd := errors.New("stream ended")
	for name, c := range map[string]struct {
		end        *ConnectResponse
		wantErr    error
		wantCode   codes.Code
		wantReason string
	}{
		"clean, with a reason": {end: EndTunnelMessage(EndReasonMaxAge, nil), wantErr: io.EOF, wantReason: EndReasonMaxAge},
		"with a status":        {end: EndTunnelMessage("", status.Error(codes.InvalidArgument, "bad")), wantCode: codes.InvalidArgument},
		"no EndTunnel":         {wantErr: streamEnd, wantReason: "from kas"},
	} {
		t.Run(name, func(t *testing.T) {
			msgs := []*ConnectResponse{info}
			if c.end != nil {
				msgs = append(msgs, c.end, info)
			}
			cancelled := 0
			s := &EndingConnectClient{
				ReverseTunnel_ConnectClient: &trailerQueue{
					clientQueue: clientQueue{recvQueue: recvQueue[*ConnectResponse]{msgs: msgs, err: streamEnd}},
					trailer:     metadata.Pairs(TunnelEndReasonKey, "from kas"),
				},
				Cancel: func() { cancelled++ },
			}
			if m, err := s.Recv(); err != nil || m != info {
				t.Fatalf("first Recv: %v, %v", m, err)
			}
			for range 2 {
				_, err := s.Recv()
				if c.wantErr != nil && err != c.wantErr || c.wantErr == nil && status.Code(err) != c.wantCode {
					t.Fatalf("Recv: %v, want %v (code %v)", err, c.wantErr, c.wantCode)
				}
			}
			var reason string
			if got := s.Trailer().Get(TunnelEndReasonKey); len(got) > 0 {
				reason = got[0]
			}
			if reason != c.wantReason {
				t.Fatalf("trailer reason %q, want %q", reason, c.wantReason)
			}
			if want := map[bool]int{true: 1, false: 0}[c.end != nil]; cancelled != want {
				t.Fatalf("stream cancelled %d times, want %d", cancelled, want)
			}
		})
	}
}
