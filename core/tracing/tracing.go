// Package tracing sets up OpenTelemetry tracing for kas and agentk and carries trace context through
// gRPC metadata and the tunnel protocol, so that a call's spans on the routing kas, the gateway kas and
// the agent's service share one trace.
//
// Tracing is off unless an OTLP endpoint is given: a kas that traces nothing pays nothing.
package tracing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// Propagator is how trace context travels: W3C traceparent and tracestate.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Provider returns a tracer provider that exports to the OTLP/gRPC endpoint (host:port, plaintext), or
// a no-op provider when endpoint is empty. Call shutdown at exit to flush spans.
func Provider(ctx context.Context, endpoint, service string) (trace.TracerProvider, func(context.Context) error, error) {
	if endpoint == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithTimeout(5*time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP exporter for %s: %w", endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	)
	return tp, tp.Shutdown, nil
}

// Off reports whether t records nothing: the no-op tracer of a kas or agentk without an OTLP endpoint.
// Callers then start no span at all, where a no-op span would still cost a context, its options and a
// trace-context parse per call; the trace context a caller sent travels on in the call's metadata
// regardless, to the gateway kas and the agent's service.
func Off(t trace.Tracer) bool {
	_, ok := t.(noop.Tracer)
	return ok
}

// NoSpan stands for a span that was not started because tracing is off (see Off).
var NoSpan trace.Span = noop.Span{}

// StartChild starts the span name under ctx's on t, or none when t records nothing (see Off): then ctx
// itself and NoSpan. A span with options checks Off itself, so that the options cost nothing either.
func StartChild(ctx context.Context, t trace.Tracer, name string) (context.Context, trace.Span) {
	if Off(t) {
		return ctx, NoSpan
	}
	return t.Start(ctx, name)
}

// MDCarrier lets the propagator read and write gRPC metadata.
type MDCarrier metadata.MD

// Get implements propagation.TextMapCarrier.
func (c MDCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (c MDCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

// Keys implements propagation.TextMapCarrier.
func (c MDCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// ValuesCarrier lets the propagator write the metadata of a tunnel's request_info.
type ValuesCarrier map[string]*rpc.Values

// Get implements propagation.TextMapCarrier.
func (c ValuesCarrier) Get(key string) string {
	if v := c[key]; v != nil && len(v.GetValue()) > 0 {
		return string(v.GetValue()[0])
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (c ValuesCarrier) Set(key, value string) { c[key] = &rpc.Values{Value: [][]byte{[]byte(value)}} }

// Keys implements propagation.TextMapCarrier.
func (c ValuesCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
