package routing

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry"
	"github.com/tunnelbench/tunnelbench/core/tunserver/request"
)

// testRouter is a Router over a fake finder, with its metrics and limit hits at hand.
type testRouter struct {
	*Router
	finder *fakeFinder
	reader *sdkmetric.ManualReader
	limits events
}

func newTestRouter(t *testing.T, finder *fakeFinder, cfg RouterConfig) *testRouter {
	t.Helper()
	tr := &testRouter{finder: finder, reader: sdkmetric.NewManualReader()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tr.reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	cfg.Finder, cfg.Meter = finder, mp.Meter("routing-test")
	cfg.OnLimit = tunserver.OnLimit(tr.limits.add)
	r, err := NewRouter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr.Router = r
	return tr
}

// routeAsync routes the call in the background; when it is over, the stream's context ends, as gRPC
// ends it when the handler returns.
func (tr *testRouter) routeAsync(s *fakeServerStream) <-chan error {
	ch := make(chan error, 1)
	go func() {
		err := tr.RouteStream(nil, s)
		s.cancel()
		ch <- err
	}()
	return ch
}

// route routes the call to its end, which must come within waitBound.
func (tr *testRouter) route(t *testing.T, s *fakeServerStream) error {
	t.Helper()
	return waitFor(t, tr.routeAsync(s), "the call's end")
}

// call routes a call for agent 42 with request messages, as caller (none when empty).
func (tr *testRouter) call(t *testing.T, caller string, request ...string) (*fakeServerStream, error) {
	t.Helper()
	ctx := context.Background()
	if caller != "" {
		ctx = auth.WithCaller(ctx, testCaller(caller))
	}
	s := newCallStream(t, ctx, testMethod, agentMD("42"), request...)
	return s, tr.route(t, s)
}

// routingMetrics are the routing histogram's counts by status and the timeout counter's value. The
// exponential twin must have counted the same routings.
func (tr *testRouter) routingMetrics(t *testing.T) (byStatus map[string]uint64, timeouts int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tr.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	byStatus = map[string]uint64{}
	twin := map[string]uint64{}
	defer func() {
		if !maps.Equal(byStatus, twin) {
			t.Errorf("%s counted %v, %s %v", RoutingDurationMetric, byStatus, RoutingDurationExponentialMetric, twin)
		}
	}()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				counts := map[string]map[string]uint64{RoutingDurationMetric: byStatus, RoutingDurationExponentialMetric: twin}[m.Name]
				if counts == nil {
					t.Fatalf("unexpected histogram %s", m.Name)
				}
				for _, dp := range d.DataPoints {
					st, _ := dp.Attributes.Value("status")
					counts[st.AsString()] += dp.Count
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					timeouts += dp.Value
				}
			}
		}
	}
	return byStatus, timeouts
}

func (tr *testRouter) wantMetrics(t *testing.T, success, aborted uint64, timeouts int64) {
	t.Helper()
	byStatus, gotTimeouts := tr.routingMetrics(t)
	if byStatus["success"] != success || byStatus["aborted"] != aborted || gotTimeouts != timeouts {
		t.Fatalf("routing metrics %v, %d timeouts; want success %d, aborted %d, %d timeouts",
			byStatus, gotTimeouts, success, aborted, timeouts)
	}
}

func wantStatus(t *testing.T, err error, code codes.Code, contains ...string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Fatalf("status %v, want %v", err, code)
	}
	for _, s := range contains {
		if !strings.Contains(st.Message(), s) {
			t.Fatalf("message %q does not name %q", st.Message(), s)
		}
	}
}

// agentAnswer writes an agent's whole answer through w: a header, data, a trailer, and a final status
// when st is not nil.
func agentAnswer(w *callerWriter, data string, st *status.Status) error {
	msgs := []*rpc.ConnectRequest{
		{Msg: &rpc.ConnectRequest_Header{Header: &rpc.Header{Meta: rpc.MetaToValues(metadata.Pairs("x-answer", "yes"))}}},
		{Msg: &rpc.ConnectRequest_Message{Message: &rpc.Message{Data: []byte(data)}}},
		{Msg: &rpc.ConnectRequest_Trailer{Trailer: &rpc.Trailer{Meta: rpc.MetaToValues(metadata.Pairs("x-t", "1"))}}},
	}
	if st != nil {
		msgs = append(msgs, &rpc.ConnectRequest{Msg: &rpc.ConnectRequest_Error{Error: &rpc.Error{Status: st.Proto()}}})
	}
	for _, m := range msgs {
		if err := w.agentMessage(m, nil, false); err != nil {
			return err
		}
	}
	return nil
}

func TestRouterRefusesBadAgentID(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   metadata.MD
	}{
		{name: "missing", md: metadata.Pairs("x-other", "1")},
		{name: "not a number", md: agentMD("forty-two")},
		{name: "twice", md: metadata.Pairs(rpc.RoutingAgentIDMetadataKey, "1", rpc.RoutingAgentIDMetadataKey, "2")},
		{name: "too large", md: agentMD("9223372036854775808")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRouter(t, findsInTurn(), RouterConfig{})
			err := tr.route(t, newCallStream(t, context.Background(), testMethod, tc.md))
			wantStatus(t, err, codes.InvalidArgument, rpc.RoutingAgentIDMetadataKey)
			if n := tr.finder.calls.Load(); n != 0 {
				t.Fatalf("a call without a valid agent id was routed (%d finds)", n)
			}
		})
	}
}

func TestRouterRefusesMetadataOverLimit(t *testing.T) {
	tr := newTestRouter(t, findsInTurn(&fakeGateway{}), RouterConfig{MaxMetadataBytes: 256})
	md := agentMD("42", "x-big", strings.Repeat("x", 300))
	err := tr.route(t, newCallStream(t, context.Background(), testMethod, md))
	wantStatus(t, err, codes.ResourceExhausted, "--max-metadata-bytes", "256")
	if got := tr.limits.String(); got != tunserver.LimitMetadataSize {
		t.Fatalf("OnLimit told %q, want %q", got, tunserver.LimitMetadataSize)
	}
	if n := tr.finder.calls.Load(); n != 0 {
		t.Fatalf("a call over the metadata limit was routed (%d finds)", n)
	}
	if _, err := tr.call(t, ""); err != nil {
		t.Fatalf("a call under the limit: %v", err)
	}
}

func TestRouterFindTimeout(t *testing.T) {
	tr := newTestRouter(t, findsInTurn(), RouterConfig{FindTimeout: 3 * time.Second})
	_, err := tr.call(t, "")
	wantStatus(t, err, codes.DeadlineExceeded, "agent 42", testMethod, "3s")
	tr.wantMetrics(t, 0, 1, 1)
	req := tr.finder.reqs[0]
	if req.AgentID != testAgentID || req.FullMethod != testMethod || req.Service != "test.Svc" || req.Method != "M" || req.FindTimeout != 3*time.Second {
		t.Fatalf("find request %+v", req)
	}
}

func TestRouterFoundRecordsSuccess(t *testing.T) {
	gw := &fakeGateway{forward: func(_ context.Context, _ *request.Pump, w *callerWriter) error {
		return agentAnswer(w, "pong", nil)
	}}
	tr := newTestRouter(t, findsInTurn(gw), RouterConfig{})
	s, err := tr.call(t, "", "ping")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.sent.String(); got != "header:yes pong" {
		t.Fatalf("caller got %q", got)
	}
	if got := s.trailer().Get("x-t"); len(got) != 1 || got[0] != "1" {
		t.Fatalf("caller's trailer %v", s.trailer())
	}
	if n := gw.released.Load(); n != 1 {
		t.Fatalf("gateway released %d times, want 1", n)
	}
	tr.wantMetrics(t, 1, 0, 0)
}

func TestRouterReturnsAgentStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status *status.Status
		want   codes.Code
	}{
		{name: "error status", status: status.New(codes.NotFound, "no such thing"), want: codes.NotFound},
		{name: "error that says OK", status: status.New(codes.OK, ""), want: codes.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := &fakeGateway{forward: func(_ context.Context, _ *request.Pump, w *callerWriter) error {
				return agentAnswer(w, "partial", tc.status)
			}}
			tr := newTestRouter(t, findsInTurn(gw), RouterConfig{})
			s, err := tr.call(t, "")
			wantStatus(t, err, tc.want, tc.status.Message())
			if got := s.sent.String(); got != "header:yes partial" {
				t.Fatalf("caller got %q", got)
			}
			tr.wantMetrics(t, 1, 0, 0) // a tunnel was found: the agent's failure is no routing failure
		})
	}
}

func TestRouterForwardErrorIsTheCallsStatus(t *testing.T) {
	gw := &fakeGateway{forward: func(context.Context, *request.Pump, *callerWriter) error {
		return status.Error(codes.Unavailable, "tunnel to agent 42 broke")
	}}
	tr := newTestRouter(t, findsInTurn(gw), RouterConfig{})
	_, err := tr.call(t, "")
	wantStatus(t, err, codes.Unavailable, "broke")
	if n := tr.finder.calls.Load(); n != 1 {
		t.Fatalf("a call that reached the agent was routed again (%d finds)", n)
	}
}

// The first gateway's tunnel went away before the agent took the call: the Router finds another, which
// gets the whole request replayed, and releases both.
func TestRouterRetriesWithdrawnTunnelOnOtherGateway(t *testing.T) {
	first := newClientStream(context.Background(), "first", testMethod)
	second := newClientStream(context.Background(), "second", testMethod)
	g1 := &fakeGateway{url: "grpc://first", forward: func(_ context.Context, pump *request.Pump, _ *callerWriter) error {
		if err := pump.Attach(&gatewayTarget{cs: first}); err != nil {
			return err
		}
		select {
		case <-first.halfClosed:
		case <-time.After(waitBound):
			return errors.New("the first gateway never got the whole request")
		}
		if !pump.Detach() {
			return errors.New("the request is not replayable")
		}
		return registry.ErrRetryOtherTunnel
	}}
	g2 := &fakeGateway{forward: func(_ context.Context, pump *request.Pump, w *callerWriter) error {
		if err := pump.Attach(&gatewayTarget{cs: second}); err != nil {
			return err
		}
		return agentAnswer(w, "pong", nil)
	}}
	tr := newTestRouter(t, findsInTurn(g1, g2), RouterConfig{})
	s, err := tr.call(t, "", "ping")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := first.sent.String(), second.sent.String(); a != "ping END" || b != "ping END" {
		t.Fatalf("first gateway got %q, second %q; want the whole request at both", a, b)
	}
	if got := s.sent.String(); got != "header:yes pong" {
		t.Fatalf("caller got %q", got)
	}
	if n1, n2, finds := g1.released.Load(), g2.released.Load(), tr.finder.calls.Load(); n1 != 1 || n2 != 1 || finds != 2 {
		t.Fatalf("released %d and %d times after %d finds, want 1, 1, 2", n1, n2, finds)
	}
	tr.wantMetrics(t, 1, 0, 0) // one call, routed once
}

func TestRouterRetryWithoutOtherTunnelTimesOut(t *testing.T) {
	withdrawn := &fakeGateway{forward: func(context.Context, *request.Pump, *callerWriter) error {
		return registry.ErrRetryOtherTunnel
	}}
	tr := newTestRouter(t, findsInTurn(withdrawn), RouterConfig{FindTimeout: time.Second})
	_, err := tr.call(t, "")
	wantStatus(t, err, codes.DeadlineExceeded, "went away as the call arrived", "agent 42", testMethod)
	tr.wantMetrics(t, 1, 0, 0) // only the first find of a call is measured
}

// gatewayAnswer is a gateway kas's whole answer: a header, data, a trailer, a final status when st is not
// nil, and the stream's end.
func gatewayAnswer(data string, st *status.Status) []recvItem {
	items := []recvItem{
		{msg: &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_Header{Header: &rpc.Header{Meta: rpc.MetaToValues(metadata.Pairs("x-answer", "yes"))}}}},
		{msg: &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_Message{Message: &rpc.Message{Data: []byte(data)}}}},
		{msg: &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_Trailer{Trailer: &rpc.Trailer{Meta: rpc.MetaToValues(metadata.Pairs("x-t", "1"))}}}},
	}
	if st != nil {
		items = append(items, recvItem{msg: &rpc.GatewayResponse{Msg: &rpc.GatewayResponse_Error{Error: &rpc.Error{Status: st.Proto()}}}})
	}
	return append(items, gatewayEOF)
}

// remoteCall routes a call with request "ping" in the background: first through a remote gateway over
// the fake gateway stream cs, then through the gateways more.
func remoteCall(t *testing.T, more ...Gateway) (s *fakeServerStream, cs *fakeClientStream, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	cs = newClientStream(ctx, "grpc://b", testMethod)
	remote := &remoteGateway{stream: cs, cancel: cancel, url: "grpc://b"}
	tr := newTestRouter(t, findsInTurn(append([]Gateway{remote}, more...)...), RouterConfig{})
	s = newCallStream(t, context.Background(), testMethod, agentMD("42"), "ping")
	return s, cs, tr.routeAsync(s)
}

func TestRouterThroughRemoteGateway(t *testing.T) {
	s, cs, done := remoteCall(t)
	waitFor(t, cs.halfClosed, "the request at the gateway")
	cs.reply(gatewayAnswer("pong", status.New(codes.NotFound, "no such thing"))...)
	err := waitFor(t, done, "the call's end")
	wantStatus(t, err, codes.NotFound, "no such thing")
	if got := s.sent.String(); got != "header:yes pong" {
		t.Fatalf("caller got %q", got)
	}
	if got := cs.sent.String(); got != "ping END" {
		t.Fatalf("gateway got %q", got)
	}
	if !cs.cancelled() {
		t.Fatal("the gateway stream outlived the call")
	}
}

// A gateway kas whose tunnel went away before the agent took the call says so in its trailer: the call
// moves to another gateway with its request replayed.
func TestRouterRemoteRetryTrailerMovesCall(t *testing.T) {
	second := newClientStream(context.Background(), "second", testMethod)
	local := &fakeGateway{forward: func(_ context.Context, pump *request.Pump, w *callerWriter) error {
		if err := pump.Attach(&gatewayTarget{cs: second}); err != nil {
			return err
		}
		return agentAnswer(w, "pong", nil)
	}}
	s, cs, done := remoteCall(t, local)
	waitFor(t, cs.halfClosed, "the request at the gateway")
	cs.setTrailer(metadata.Pairs(rpc.GatewayRetryTrailerKey, "1"))
	cs.reply(recvItem{err: status.Error(codes.Unavailable, "tunnel withdrawn")})
	if err := waitFor(t, done, "the call's end"); err != nil {
		t.Fatal(err)
	}
	if got := second.sent.String(); got != "ping END" {
		t.Fatalf("second gateway got %q, want the request replayed", got)
	}
	if got := s.sent.String(); got != "header:yes pong" {
		t.Fatalf("caller got %q", got)
	}
	if !cs.cancelled() || local.released.Load() != 1 {
		t.Fatal("a gateway was not released")
	}
}

// A caller may hold MaxWaitingPerCaller calls waiting for tunnels, whatever agents they are for; other
// callers are not affected, and a finished find frees its place.
func TestRouterBoundsWaitingCallsPerCaller(t *testing.T) {
	entered := make(chan string, 8)
	release := make(chan struct{})
	finder := &fakeFinder{find: func(ctx context.Context, req FindRequest) (Gateway, error) {
		entered <- req.Metadata.Get("x-call")[0]
		select {
		case <-release:
			return nil, &findTimeoutError{timeout: time.Millisecond}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	tr := newTestRouter(t, finder, RouterConfig{MaxWaitingPerCaller: 2})
	stream := func(caller, name string) *fakeServerStream {
		return newCallStream(t, auth.WithCaller(context.Background(), testCaller(caller)), testMethod, agentMD("42", "x-call", name))
	}
	a1, a2 := tr.routeAsync(stream("a", "a1")), tr.routeAsync(stream("a", "a2"))
	waitFor(t, entered, "a's first call finding")
	waitFor(t, entered, "a's second call finding")

	err := tr.route(t, stream("a", "a3"))
	wantStatus(t, err, codes.ResourceExhausted, "--max-waiting-calls-per-caller", "2")
	if got := tr.limits.String(); got != tunserver.LimitWaitingByCaller {
		t.Fatalf("OnLimit told %q, want %q", got, tunserver.LimitWaitingByCaller)
	}
	b1 := tr.routeAsync(stream("b", "b1"))
	if name := waitFor(t, entered, "b's call finding"); name != "b1" {
		t.Fatalf("%s found, want b1", name)
	}

	close(release)
	for _, done := range []<-chan error{a1, a2, b1} {
		wantStatus(t, waitFor(t, done, "a waiting call's end"), codes.DeadlineExceeded)
	}
	wantStatus(t, tr.route(t, stream("a", "a4")), codes.DeadlineExceeded) // a's places are free again
	if n := finder.calls.Load(); n != 4 {
		t.Fatalf("%d finds, want 4 (a1, a2, b1, a4)", n)
	}
}

func TestRouterCallerGoneWhileFinding(t *testing.T) {
	entered := make(chan struct{})
	finder := &fakeFinder{find: func(ctx context.Context, _ FindRequest) (Gateway, error) {
		close(entered)
		<-ctx.Done() // the stream's context ends with the test at the latest
		return nil, ctx.Err()
	}}
	tr := newTestRouter(t, finder, RouterConfig{})
	s := newCallStream(t, context.Background(), testMethod, agentMD("42"))
	done := tr.routeAsync(s)
	waitFor(t, entered, "the find")
	s.cancel()
	wantStatus(t, waitFor(t, done, "the call's end"), codes.Canceled)
	tr.wantMetrics(t, 0, 1, 0) // aborted, but no timeout
}
