// Package dashboards builds the Grafana dashboards for the tunnel and the harness with the Grafana
// Foundation SDK; `go run ./dashboards/gen` writes them as the committed JSON files next to this file.
//
// It only describes queries: metric names are strings here, a contract that the tests in this folder
// check against live kas, agentk and harness registries. It never imports the tunnel core.
package dashboards

//go:generate go run ./gen -out .

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// DatasourceVar is the template variable every query uses as its datasource (type prometheus).
const DatasourceVar = "datasource"

// DatasourceUID is the uid of the Prometheus datasource that provisioning/datasources creates; the
// datasource variable selects it by default.
const DatasourceUID = "tunnelbench-prometheus"

// Dashboard is one dashboard and the file it is written to.
type Dashboard struct {
	// File is the JSON file name in this folder.
	File  string
	Build func() (dashboard.Dashboard, error)
}

// All is every dashboard, in a stable order.
func All() []Dashboard {
	return []Dashboard{
		{File: "tunnel-overview.json", Build: TunnelOverview},
		{File: "chaos-run.json", Build: ChaosRun},
		{File: "agents.json", Build: Agents},
	}
}

// Render builds d and encodes it as indented JSON with a final newline, the committed form.
func Render(d Dashboard) ([]byte, error) {
	dash, err := d.Build()
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", d.File, err)
	}
	numberPanels(&dash)
	b, err := json.MarshalIndent(dash, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", d.File, err)
	}
	return append(b, '\n'), nil
}

// numberPanels gives every panel and row a unique id, in layout order, so that links to a panel stay
// stable across regenerations.
func numberPanels(d *dashboard.Dashboard) {
	id := uint32(0)
	for i := range d.Panels {
		id++
		switch p := d.Panels[i]; {
		case p.Panel != nil:
			p.Panel.Id = cog.ToPtr(id)
		case p.RowPanel != nil:
			p.RowPanel.Id = id
			for j := range p.RowPanel.Panels {
				id++
				p.RowPanel.Panels[j].Id = cog.ToPtr(id)
			}
		}
	}
}

// datasource is the reference every panel, query and query variable uses: whatever the datasource
// variable selects.
func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + DatasourceVar + "}")}
}

// newDashboard has what every tunnelbench dashboard shares: the datasource variable, refresh, time range
// and tags.
func newDashboard(uid, title, description string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"tunnelbench"}).
		Editable().
		Refresh("5s").
		Time("now-15m", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(DatasourceVar).
			Label("Prometheus").
			Type("prometheus").
			Current(dashboard.VariableOption{
				Text:  dashboard.StringOrArrayOfString{String: cog.ToPtr("Prometheus")},
				Value: dashboard.StringOrArrayOfString{String: cog.ToPtr(DatasourceUID)},
			}))
}

// labelVariable is a multi-value variable over the values of label on metric. "All" expands to the
// values found, never to .*, so that a filter on it never matches a series of another component.
func labelVariable(name, label, metric string) *dashboard.QueryVariableBuilder {
	q := fmt.Sprintf("label_values(%s, %s)", metric, label)
	return dashboard.NewQueryVariableBuilder(name).
		Label(name).
		Datasource(datasource()).
		Query(dashboard.StringOrMap{String: &q}).
		Definition(q).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true)
}

// target is one PromQL query of a panel.
type target struct {
	expr, legend string
	heatmap      bool
	// instant evaluates the query once, at the end of the time range (stat panels).
	instant bool
}

func q(expr, legend string) target { return target{expr: expr, legend: legend} }

// targets turns queries into SDK queries with reference ids A, B, ...
func targets(ts []target) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(ts))
	for i, t := range ts {
		b := prometheus.NewDataqueryBuilder().
			Datasource(datasource()).
			RefId(string(rune('A' + i))).
			Expr(t.expr).
			LegendFormat(t.legend)
		if t.instant {
			b.Instant()
		} else {
			b.Range()
		}
		if t.heatmap {
			b.Format(prometheus.PromQueryFormatHeatmap)
		}
		out = append(out, b)
	}
	return out
}
