package kas_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/tracing"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/internal/testenv"
)

func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	t.Fatalf("no span %q among %v", name, names)
	return nil
}

// callerCtx starts a caller span and puts its traceparent into the outgoing metadata, as an
// instrumented gRPC client would.
func callerCtx(t *testing.T, ctx context.Context) (context.Context, trace.SpanContext) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("caller").Start(ctx, "caller")
	t.Cleanup(func() { span.End() })
	md := metadata.MD{}
	propagation.TraceContext{}.Inject(ctx, tracing.MDCarrier(md))
	return metadata.NewOutgoingContext(ctx, md), span.SpanContext()
}

func TestTraceReachesTheAgentsService(t *testing.T) {
	kasSpans, agentSpans := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	kasTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(kasSpans))
	agentTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(agentSpans))
	defer func() { _ = kasTP.Shutdown(context.Background()); _ = agentTP.Shutdown(context.Background()) }()
	e := testenv.Start(t, testenv.Options{
		Kas:   func(c *kas.Config) { c.Tracer = kasTP.Tracer("kas") },
		Agent: func(_ int64, c *tunclient.Config) { c.Tracer = agentTP.Tracer("agent") },
	})
	ctx, caller := callerCtx(t, testCtx(t))
	if _, err := testgrpc.NewTestServiceClient(e.Public).EmptyCall(testenv.AgentCtx(ctx, 1), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	route := spanNamed(t, kasSpans.Ended(), "kas.route")
	forward := spanNamed(t, kasSpans.Ended(), "kas.forward")
	// The agent ends its span after the response is on its way to the caller.
	testenv.Eventually(t, 5*time.Second, func() bool { return len(agentSpans.Ended()) > 0 }, "the agent recorded no span")
	call := spanNamed(t, agentSpans.Ended(), "agent.call")
	if route.SpanContext().TraceID() != caller.TraceID() || route.Parent().SpanID() != caller.SpanID() {
		t.Fatalf("kas.route is not a child of the caller's span")
	}
	if forward.Parent().SpanID() != route.SpanContext().SpanID() || spanNamed(t, kasSpans.Ended(), "kas.find_gateway").Parent().SpanID() != route.SpanContext().SpanID() {
		t.Fatalf("find gateway and forward are not children of kas.route")
	}
	if call.SpanContext().TraceID() != caller.TraceID() || call.Parent().SpanID() != forward.SpanContext().SpanID() {
		t.Fatalf("agent.call is not a child of kas.forward")
	}
	seen := e.Agents[1].Service.Seen()
	tp := seen[len(seen)-1].Metadata.Get("traceparent")
	if len(tp) != 1 || !strings.Contains(tp[0], caller.TraceID().String()) || !strings.Contains(tp[0], call.SpanContext().SpanID().String()) {
		t.Fatalf("the service saw traceparent %v, want trace %s under span %s", tp, caller.TraceID(), call.SpanContext().SpanID())
	}
}

func TestTraceCrossesKas(t *testing.T) {
	recs := []*tracetest.SpanRecorder{tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()}
	tps := []*sdktrace.TracerProvider{sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recs[0])), sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recs[1]))}
	defer func() {
		for _, tp := range tps {
			_ = tp.Shutdown(context.Background())
		}
	}()
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{Kas: func(i int, cfg *kas.Config) { cfg.Tracer = tps[i].Tracer("kas") }})
	c.StartAgent(1, 1)
	ctx, caller := callerCtx(t, testCtx(t))
	if _, err := testgrpc.NewTestServiceClient(c.Public[0]).EmptyCall(testenv.AgentCtx(ctx, 1), &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	find := spanNamed(t, recs[0].Ended(), "kas.find_gateway")
	gateway := spanNamed(t, recs[1].Ended(), "kas.gateway")
	if gateway.SpanContext().TraceID() != caller.TraceID() || gateway.Parent().SpanID() != find.SpanContext().SpanID() {
		t.Fatalf("the gateway kas's span is not a child of the routing kas's find")
	}
	spanNamed(t, recs[1].Ended(), "kas.find_tunnel")
}

// A kas or agent that traces nothing starts no span (tracing.Off), and the caller's trace still goes
// through it: a traced gateway kas behind an untraced routing kas continues the caller's span, and the
// agent's service, behind an untraced agent, sees the caller's traceparent.
func TestTraceCrossesUntracedKasAndAgent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	c := testenv.StartCluster(t, 2, testenv.ClusterOptions{Kas: func(i int, cfg *kas.Config) {
		if i == 1 {
			cfg.Tracer = tp.Tracer("kas")
		}
	}})
	ae := c.StartAgent(1, 1)
	ctx, caller := callerCtx(t, testCtx(t))
	for range 2 { // searched, then eager
		if _, err := testgrpc.NewTestServiceClient(c.Public[0]).EmptyCall(testenv.AgentCtx(ctx, 1), &testpb.Empty{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range rec.Ended() {
		if s.Name() == "kas.gateway" && (s.SpanContext().TraceID() != caller.TraceID() || s.Parent().SpanID() != caller.SpanID()) {
			t.Fatalf("the gateway kas's span is not a child of the caller's span behind an untraced routing kas")
		}
	}
	spanNamed(t, rec.Ended(), "kas.gateway")
	seen := ae.Service.Seen()
	got := seen[len(seen)-1].Metadata.Get("traceparent")
	if len(got) != 1 || !strings.Contains(got[0], caller.TraceID().String()) {
		t.Fatalf("the service saw traceparent %v, want trace %s", got, caller.TraceID())
	}
}
