package httptunnel

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
)

// eventLog is what the agent did, in order: "accept" for an empty gRPC header (the early accept),
// "upstream" when the upstream got the request, "answer" for the response header message.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

type acceptStream struct {
	*fuzzServerStream
	log *eventLog
}

func (s acceptStream) SendHeader(metadata.MD) error {
	s.log.add("accept")
	return nil
}

func (s acceptStream) Send(m *HTTPResponse) error {
	if m.GetHeader() != nil {
		s.log.add("answer")
	}
	return s.fuzzServerStream.Send(m)
}

type acceptUpstream struct {
	*fuzzUpstreamServer
	log *eventLog
}

func (u acceptUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	u.log.add("upstream")
	return u.fuzzUpstreamServer.RoundTrip(r)
}

// TestEarlyAcceptOnlyWithABody: a request with a body (of known or unknown length) is accepted with an
// empty header before the upstream sees it, so that kas stops keeping the body for a replay and can send
// more than its replay bound (TestLargeBodiesFlatMemory's upload needs that). A body-less request is
// accepted by its answer: one tunnel message and one write fewer each way.
func TestEarlyAcceptOnlyWithABody(t *testing.T) {
	for _, tc := range []struct {
		name          string
		method        string
		contentLength int64
		body          []byte
		want          []string
	}{
		{"GET without a body", http.MethodGet, 0, nil, []string{"upstream", "answer"}},
		{"POST without a body", http.MethodPost, 0, nil, []string{"upstream", "answer"}},
		{"POST with a body", http.MethodPost, 5, []byte("hello"), []string{"accept", "upstream", "answer"}},
		{"POST with a chunked body", http.MethodPost, -1, []byte("hello"), []string{"accept", "upstream", "answer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &eventLog{}
			up := acceptUpstream{fuzzUpstreamServer: &fuzzUpstreamServer{readBody: true}, log: log}
			u, err := NewUpstream(&url.URL{Scheme: "http", Host: "upstream.test"},
				WithHTTPClient(&http.Client{Transport: up}))
			if err != nil {
				t.Fatal(err)
			}
			msgs := []*HTTPRequest{{Msg: &HTTPRequest_Header_{Header: &HTTPRequest_Header{Method: tc.method, Path: "/x", ContentLength: tc.contentLength}}}}
			if len(tc.body) > 0 {
				msgs = append(msgs, &HTTPRequest{Msg: &HTTPRequest_Body{Body: &BodyChunk{Data: tc.body}}})
			}
			msgs = append(msgs, &HTTPRequest{Msg: &HTTPRequest_End_{End: &HTTPRequest_End{}}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stream := acceptStream{fuzzServerStream: &fuzzServerStream{ctx: ctx, cancel: cancel, in: msgs}, log: log}
			if err := u.Exchange(stream); err != nil {
				t.Fatalf("Exchange: %v", err)
			}
			if got := log.get(); !slices.Equal(got, tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
			if _, body, _ := up.result(); string(body) != string(tc.body) {
				t.Errorf("upstream got body %q, want %q", body, tc.body)
			}
		})
	}
}
