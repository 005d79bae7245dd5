package httptunnel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
	"github.com/tunnelbench/tunnelbench/core/httptunnel"
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// TestInlineBodyOnlyWhenKasAsks calls an agent's Upstream as kas would, with and without the request
// metadata that asks for small bodies inside the response header: a kas that does not ask (an older
// one) always gets chunks, and so does one that asks, for a body of unknown length or larger than one
// chunk. What arrives is the same body either way. An inline body is the whole answer at hand: the
// handler tells its stream so (grpctool.HoldAnswer), so that on a tunnel the rest leaves with its end.
func TestInlineBodyOnlyWhenKasAsks(t *testing.T) {
	const chunk = 16
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := strings.Repeat("b", len(r.URL.Path)) // the path's length picks the body's
		if r.URL.Query().Has("chunked") {
			w.(http.Flusher).Flush() // no Content-Length
		} else {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		}
		_, _ = io.WriteString(w, body)
	}))
	defer upstream.Close()
	base, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	l := grpctool.NewInMemoryListener()
	var held atomic.Int32
	srv := grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ts := holdRecorder{ServerTransportStream: grpc.ServerTransportStreamFromContext(ss.Context()), held: &held}
		return handler(srv, ctxStream{ServerStream: ss, ctx: grpc.NewContextWithServerTransportStream(ss.Context(), ts)})
	}))
	u, err := httptunnel.Register(srv, base, httptunnel.WithChunkSize(chunk))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	conn, err := grpctool.DialInMemory(l)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := httptunnel.NewHTTPTunnelClient(conn)

	for _, tc := range []struct {
		name, path, query string
		ask, inline       bool
	}{
		{"asked small", "/small", "", true, true},
		{"asked exactly one chunk", "/" + strings.Repeat("p", chunk-1), "", true, true},
		{"asked larger than a chunk", "/" + strings.Repeat("p", chunk), "", true, false},
		{"asked unknown length", "/small", "chunked", true, false},
		{"not asked (older kas)", "/small", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.ask {
				ctx = metadata.AppendToOutgoingContext(ctx, rpc.HTTPInlineBodyMetadataKey, "1")
			}
			held.Store(0)
			stream, err := client.Exchange(ctx)
			if err != nil {
				t.Fatal(err)
			}
			req := &httptunnel.HTTPRequest{Msg: &httptunnel.HTTPRequest_Header_{Header: &httptunnel.HTTPRequest_Header{Method: http.MethodGet, Path: tc.path, RawQuery: tc.query}}}
			// A body-less GET may be answered, and its stream ended, before the end goes out: Send then
			// says io.EOF, and the outcome is Recv's to tell.
			if err := stream.Send(req); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if err := stream.Send(&httptunnel.HTTPRequest{Msg: &httptunnel.HTTPRequest_End_{End: &httptunnel.HTTPRequest_End{}}}); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if err := stream.CloseSend(); err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			var inlined, chunks int
			for {
				m, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if b := m.GetHeader().GetBody(); len(b) > 0 {
					inlined++
					got.Write(b)
				}
				if b := m.GetBody().GetData(); len(b) > 0 {
					chunks++
					got.Write(b)
				}
			}
			if want := strings.Repeat("b", len(tc.path)); got.String() != want {
				t.Fatalf("body %q, want %q", got.String(), want)
			}
			if (inlined == 1 && chunks == 0) != tc.inline || inlined > 1 {
				t.Fatalf("%d inline bodies and %d chunks; inline wanted: %v", inlined, chunks, tc.inline)
			}
			if n := held.Load(); (n == 1) != tc.inline || n > 1 {
				t.Fatalf("the answer was held %d times; held wanted: %v", n, tc.inline)
			}
		})
	}
}

// holdRecorder counts the handler's grpctool.HoldAnswer calls on a grpc.Server's stream.
type holdRecorder struct {
	grpc.ServerTransportStream
	held *atomic.Int32
}

func (h holdRecorder) HoldAnswer() { h.held.Add(1) }

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }
