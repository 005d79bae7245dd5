package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// kasFilter restricts tunnel and gRPC server series to the kas instances the kas variable selects.
const kasFilter = `instance=~"$kas"`

// TunnelOverview is the kas view: routed calls, how long routing takes, timeouts, tunnels, waiting
// calls, connected agents and gRPC errors.
func TunnelOverview() (dashboard.Dashboard, error) {
	return newDashboard("tunnelbench-tunnel", "Tunnel overview",
		"kas: calls routed through agent tunnels, routing time, timeouts, tunnels and gRPC errors.").
		WithVariable(labelVariable("kas", "instance", "tunnel_tunnels")).
		WithRow(row("Routing")).
		WithPanel(graph("Routed calls/s",
			"Calls for which kas found a tunnel (success), and calls that gave up or were cancelled while waiting (aborted).",
			"reqps", halfWidth,
			q(`sum by (instance) (rate(tunnel_routing_duration_seconds_count{`+kasFilter+`,status="success"}[$__rate_interval]))`, "routed {{instance}}"),
			q(`sum by (instance) (rate(tunnel_routing_duration_seconds_count{`+kasFilter+`,status="aborted"}[$__rate_interval]))`, "aborted {{instance}}"),
		)).
		WithPanel(graph("Routing duration",
			"Time to find a tunnel for a call, successful routings only. Buckets grow ×4 from 1 ms, so quantiles are coarse.",
			"s", halfWidth,
			routingQuantile("0.5", "p50"), routingQuantile("0.9", "p90"), routingQuantile("0.99", "p99"),
		)).
		WithPanel(heat("Routing duration heatmap",
			"Successful routings per second by duration bucket.",
			halfWidth,
			`sum by (le) (rate(tunnel_routing_duration_seconds_bucket{`+kasFilter+`,status="success"}[$__rate_interval]))`,
		)).
		WithPanel(graph("Routing timeouts/s",
			"Calls that found no suitable tunnel within the find timeout; they fail with DeadlineExceeded.",
			"reqps", quarterWidth,
			q(`sum by (instance) (rate(tunnel_routing_timeout_total{`+kasFilter+`}[$__rate_interval]))`, "{{instance}}"),
		)).
		WithPanel(single("Routing timeouts in range",
			"Routing timeouts over the dashboard's time range.",
			"short", quarterWidth,
			q(`sum(increase(tunnel_routing_timeout_total{`+kasFilter+`}[$__range]))`, "timeouts"),
		)).
		WithRow(row("Tunnels")).
		WithPanel(stacked("Tunnels by state",
			"Tunnels held by kas: idle ones wait for a call, busy ones carry one.",
			"short", thirdWidth,
			q(`sum by (state) (tunnel_tunnels{`+kasFilter+`})`, "{{state}}"),
		)).
		WithPanel(graph("Waiting calls",
			"Calls waiting on kas for an idle tunnel. Anything but a brief spike means agents have too few tunnels.",
			"short", thirdWidth,
			q(`sum by (instance) (tunnel_waiting_calls{`+kasFilter+`})`, "{{instance}}"),
		)).
		WithPanel(graph("Connected agents",
			"Agents with at least one tunnel to each kas.",
			"short", thirdWidth,
			q(`sum by (instance) (tunnel_connected_agents{`+kasFilter+`})`, "{{instance}}"),
		)).
		WithRow(row("gRPC")).
		WithPanel(graph("gRPC errors/s by code",
			"Calls kas answered with a code other than OK. Routed calls are counted under tunnelbench.routed, "+
				"agent tunnels under tunnelbench.rpc.v1.ReverseTunnel.",
			"reqps", halfWidth,
			q(`sum by (grpc_service, grpc_code) (rate(grpc_server_handled_total{`+kasFilter+`,grpc_code!="OK"}[$__rate_interval]))`, "{{grpc_service}} {{grpc_code}}"),
		)).
		WithPanel(graph("Routed call error ratio",
			"Share of routed calls that did not end with OK.",
			"percentunit", halfWidth,
			q(`sum(rate(grpc_server_handled_total{`+kasFilter+`,grpc_service="tunnelbench.routed",grpc_code!="OK"}[$__rate_interval]))`+
				` / sum(rate(grpc_server_handled_total{`+kasFilter+`,grpc_service="tunnelbench.routed"}[$__rate_interval]))`, "errors"),
		)).
		Build()
}

func routingQuantile(quantile, legend string) target {
	return q(`histogram_quantile(`+quantile+`, sum by (le) (rate(tunnel_routing_duration_seconds_bucket{`+kasFilter+`,status="success"}[$__rate_interval])))`, legend)
}
