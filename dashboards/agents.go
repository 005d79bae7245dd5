package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// tunnelService is the gRPC service of agent tunnels, as the standard gRPC metrics label it.
const tunnelService = `grpc_service="tunnelbench.rpc.v1.ReverseTunnel",grpc_method="Connect"`

// Agents is the agents' view of their tunnels: connections by state, connect errors and how often
// tunnels are (re)opened, seen from agentk and from kas.
func Agents() (dashboard.Dashboard, error) {
	return newDashboard("tunnelbench-agents", "Agents",
		"agentk: tunnel connections by state, connect errors and reconnects.").
		WithPanel(stacked("Agent connections by state",
			"Tunnels of each agent: connecting, idle (waiting for a call) and busy (carrying one).",
			"short", halfWidth,
			q(`sum by (instance, state) (tunnel_agent_connections)`, "{{instance}} {{state}}"),
		)).
		WithPanel(graph("Connect errors/s by code",
			"Tunnels that failed to connect or broke, by gRPC code. The agent backs off after each one.",
			"reqps", halfWidth,
			q(`sum by (instance, code) (rate(tunnel_agent_connect_errors_total[$__rate_interval]))`, "{{instance}} {{code}}"),
		)).
		WithPanel(graph("Tunnels opened/s",
			"Tunnel streams (Connect) started: as agentk counts them, and as kas counts them. "+
				"A rise without a rise in calls means tunnels break or rotate.",
			"reqps", halfWidth,
			q(`sum by (instance) (rate(grpc_client_started_total{`+tunnelService+`}[$__rate_interval]))`, "agentk {{instance}}"),
			q(`sum by (instance) (rate(grpc_server_started_total{`+tunnelService+`}[$__rate_interval]))`, "kas {{instance}}"),
		)).
		WithPanel(graph("Tunnels ended/s by code (kas)",
			"Tunnel streams that ended on kas, by gRPC code.",
			"reqps", halfWidth,
			q(`sum by (grpc_code) (rate(grpc_server_handled_total{`+tunnelService+`}[$__rate_interval]))`, "{{grpc_code}}"),
		)).
		WithPanel(single("Connect errors in range",
			"Connect errors over the dashboard's time range, by code.",
			"short", halfWidth,
			q(`sum by (code) (increase(tunnel_agent_connect_errors_total[$__range]))`, "{{code}}"),
		)).
		WithPanel(single("Connected agents",
			"Agents with at least one tunnel, per kas.",
			"short", halfWidth,
			q(`sum by (instance) (tunnel_connected_agents)`, "{{instance}}"),
		)).
		Build()
}
