package registry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names. In Prometheus they appear as tunnel_tunnels{state}, tunnel_waiting_calls and
// tunnel_connected_agents.
const (
	TunnelsMetric         = "tunnel_tunnels"
	WaitingCallsMetric    = "tunnel_waiting_calls"
	ConnectedAgentsMetric = "tunnel_connected_agents"
	// TunnelsOpenedMetric and TunnelsReusedMetric show reuse: calls per tunnel is
	// (opened + reused) / opened over any window.
	TunnelsOpenedMetric = "tunnel_tunnels_opened"
	TunnelsReusedMetric = "tunnel_tunnels_reused"
	// TunnelsBatchedMetric against TunnelsOpenedMetric shows how far a rolling upgrade got: the
	// tunnels that batch messages (both ends of a version that does).
	TunnelsBatchedMetric = "tunnel_tunnels_batched"
)

// RegisterMetrics exposes the registry's gauges: tunnels by state, waiting calls, connected agents.
func RegisterMetrics(m metric.Meter, r *Registry) error {
	tunnels, err := m.Int64ObservableGauge(TunnelsMetric, metric.WithDescription("Tunnels held by this kas, by state (idle, busy, closing: ended, the agent asked to close its stream)"))
	if err != nil {
		return err
	}
	waiting, err := m.Int64ObservableGauge(WaitingCallsMetric, metric.WithDescription("Calls waiting on this kas for a tunnel"))
	if err != nil {
		return err
	}
	agents, err := m.Int64ObservableGauge(ConnectedAgentsMetric, metric.WithDescription("Agents with at least one tunnel to this kas"))
	if err != nil {
		return err
	}
	opened, err := m.Int64ObservableCounter(TunnelsOpenedMetric, metric.WithDescription("Tunnels agents opened on this kas (descriptor accepted)"))
	if err != nil {
		return err
	}
	reused, err := m.Int64ObservableCounter(TunnelsReusedMetric, metric.WithDescription("Calls after which a reusable tunnel went back to idle for the next one"))
	if err != nil {
		return err
	}
	batched, err := m.Int64ObservableCounter(TunnelsBatchedMetric, metric.WithDescription("Tunnels opened on this kas whose agent and kas batch messages (see tunnel_tunnels_opened)"))
	if err != nil {
		return err
	}
	idle := metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "idle")))
	busy := metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "busy")))
	closing := metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "closing")))
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := r.Stats()
		o.ObserveInt64(tunnels, s.IdleTunnels, idle)
		o.ObserveInt64(tunnels, s.BusyTunnels, busy)
		o.ObserveInt64(tunnels, s.ClosingTunnels, closing)
		o.ObserveInt64(waiting, s.WaitingCalls)
		o.ObserveInt64(agents, s.ConnectedAgents)
		c := r.Counts()
		o.ObserveInt64(opened, c.TunnelsOpened)
		o.ObserveInt64(reused, c.TunnelsReused)
		o.ObserveInt64(batched, c.TunnelsBatched)
		return nil
	}, tunnels, waiting, agents, opened, reused, batched)
	return err
}
