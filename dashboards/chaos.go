package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// scenarioFilter restricts harness series to the scenarios the scenario variable selects.
const scenarioFilter = `scenario=~"$scenario"`

// ChaosRun is the harness view of a run: what the load generator offered and achieved, latency and
// errors as callers saw them, which faults were active when, and how long recovery took.
func ChaosRun() (dashboard.Dashboard, error) {
	return newDashboard("tunnelbench-chaos", "Chaos run",
		"tunnelbench harness: offered and achieved load, latency, errors, active faults and recovery.").
		WithVariable(labelVariable("scenario", "scenario", "tunnelbench_offered_calls_total")).
		Annotation(dashboard.NewAnnotationQueryBuilder().
			Name("Faults").
			Datasource(datasource()).
			Enable(true).
			IconColor("red").
			Expr(`max by (scenario, link, fault) (tunnelbench_fault_active{` + scenarioFilter + `}) > 0`).
			TitleFormat("{{fault}} on {{link}}").
			TextFormat("scenario {{scenario}}").
			TagKeys("scenario,link,fault").
			Step("1s").
			UseValueForTime(false)).
		WithRow(row("Load")).
		WithPanel(graph("Offered vs achieved calls/s",
			"Offered: calls the generator meant to send. Finished: calls that ended, whatever their code. "+
				"OK: calls that succeeded. A gap between offered and finished means the generator fell behind.",
			"reqps", halfWidth,
			q(`sum by (scenario) (rate(tunnelbench_offered_calls_total{`+scenarioFilter+`}[$__rate_interval]))`, "offered {{scenario}}"),
			q(`sum by (scenario) (rate(tunnelbench_calls_total{`+scenarioFilter+`}[$__rate_interval]))`, "finished {{scenario}}"),
			q(`sum by (scenario) (rate(tunnelbench_calls_total{`+scenarioFilter+`,code="OK"}[$__rate_interval]))`, "OK {{scenario}}"),
		)).
		WithPanel(timeline("Active faults",
			"Faults injected on each link: red while active. The same periods are marked on every graph.",
			halfWidth,
			q(`max by (link, fault) (tunnelbench_fault_active{`+scenarioFilter+`})`, "{{fault}} on {{link}}"),
		)).
		WithRow(row("Callers' view")).
		WithPanel(graph("Call latency",
			"Duration of finished calls as callers saw them, all codes.",
			"s", halfWidth,
			callQuantile("0.5", "p50"), callQuantile("0.9", "p90"), callQuantile("0.99", "p99"), callQuantile("0.999", "p99.9"),
		)).
		WithPanel(heat("Call latency heatmap",
			"Finished calls per second by duration bucket.",
			halfWidth,
			`sum by (le) (rate(tunnelbench_call_duration_seconds_bucket{`+scenarioFilter+`}[$__rate_interval]))`,
		)).
		WithPanel(graph("Errors/s by code",
			"Finished calls whose gRPC code was not OK.",
			"reqps", halfWidth,
			q(`sum by (scenario, code) (rate(tunnelbench_calls_total{`+scenarioFilter+`,code!="OK"}[$__rate_interval]))`, "{{scenario}} {{code}}"),
		)).
		WithPanel(graph("Success ratio",
			"Share of finished calls that ended with OK.",
			"percentunit", halfWidth,
			q(`sum by (scenario) (rate(tunnelbench_calls_total{`+scenarioFilter+`,code="OK"}[$__rate_interval]))`+
				` / sum by (scenario) (rate(tunnelbench_calls_total{`+scenarioFilter+`}[$__rate_interval]))`, "{{scenario}}"),
		).Max(1)).
		WithRow(row("Recovery")).
		WithPanel(single("Recovery time",
			"Seconds from the end of the last fault until the success rate was back.",
			"s", fullWidth,
			q(`max by (scenario) (tunnelbench_recovery_seconds{`+scenarioFilter+`})`, "{{scenario}}"),
		).NoValue("no recovery yet")).
		Build()
}

func callQuantile(quantile, legend string) target {
	return q(`histogram_quantile(`+quantile+`, sum by (le, scenario) (rate(tunnelbench_call_duration_seconds_bucket{`+scenarioFilter+`}[$__rate_interval])))`,
		legend+" {{scenario}}")
}
