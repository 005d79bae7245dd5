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
	connectErrors metric.Int64Counter
}

var (
	stateConnecting = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "connecting")))
	stateIdle       = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "idle")))
	stateBusy       = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "busy")))
)

// newAgentMetrics registers the agent's metrics; stats is read at each collection, so that the pool's
// hot path records nothing.
func newAgentMetrics(m metric.Meter, stats func() Stats) (*agentMetrics, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	c, err := m.Int64ObservableGauge(ConnectionsMetric,
		metric.WithDescription("Tunnels of this agent, by state (connecting, idle, busy)"))
	if err != nil {
		return nil, err
	}
	if _, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := stats()
		o.ObserveInt64(c, int64(st.Connecting), stateConnecting)
		o.ObserveInt64(c, int64(st.Idle), stateIdle)
		o.ObserveInt64(c, int64(st.Busy), stateBusy)
		return nil
	}, c); err != nil {
		return nil, err
	}
	e, err := m.Int64Counter(ConnectErrorsMetric,
		metric.WithDescription("Tunnels that failed to connect or broke, by gRPC code"))
	if err != nil {
		return nil, err
	}
	// Present from the start, so that dashboards see 0 rather than no data.
	e.Add(context.Background(), 0, metric.WithAttributes(attribute.String("code", codes.Unavailable.String())))
	return &agentMetrics{connectErrors: e}, nil
}

func (m *agentMetrics) connectError(code codes.Code) {
	m.connectErrors.Add(context.Background(), 1, metric.WithAttributes(attribute.String("code", code.String())))
}
