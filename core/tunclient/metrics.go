package tunclient

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc/codes"
)

// Metric names. In Prometheus: tunnel_agent_connections{state} and tunnel_agent_connect_errors_total{code}.
const (
	ConnectionsMetric   = "tunnel_agent_connections"
	ConnectErrorsMetric = "tunnel_agent_connect_errors"
)

type agentMetrics struct {
	connections   metric.Int64UpDownCounter
	connectErrors metric.Int64Counter
}

var (
	stateConnecting = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "connecting")))
	stateIdle       = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "idle")))
	stateBusy       = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "busy")))
)

func newAgentMetrics(m metric.Meter) (*agentMetrics, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	c, err := m.Int64UpDownCounter(ConnectionsMetric,
		metric.WithDescription("Tunnels of this agent, by state (connecting, idle, busy)"))
	if err != nil {
		return nil, err
	}
	e, err := m.Int64Counter(ConnectErrorsMetric,
		metric.WithDescription("Tunnels that failed to connect or broke, by gRPC code"))
	if err != nil {
		return nil, err
	}
	return &agentMetrics{connections: c, connectErrors: e}, nil
}

func (m *agentMetrics) move(from, to metric.MeasurementOption) {
	ctx := context.Background()
	if from != nil {
		m.connections.Add(ctx, -1, from)
	}
	if to != nil {
		m.connections.Add(ctx, 1, to)
	}
}

func (m *agentMetrics) connectError(code codes.Code) {
	m.connectErrors.Add(context.Background(), 1, metric.WithAttributes(attribute.String("code", code.String())))
}
