package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Panel sizes on Grafana's 24-column grid.
const (
	fullWidth    = 24
	halfWidth    = 12
	thirdWidth   = 8
	quarterWidth = 6
	graphHeight  = 8
	statHeight   = 4
)

// graph is a time series panel.
func graph(title, description, unit string, width uint32, ts ...target) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Targets(targets(ts)).
		Unit(unit).
		Min(0).
		Span(width).
		Height(graphHeight).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
}

// stacked is a graph whose series add up, such as tunnels by state.
func stacked(title, description, unit string, width uint32, ts ...target) *timeseries.PanelBuilder {
	return graph(title, description, unit, width, ts...).
		FillOpacity(40).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))
}

// single is a stat panel showing the last value of each series.
func single(title, description, unit string, width uint32, ts ...target) *stat.PanelBuilder {
	for i := range ts {
		ts[i].instant = true
	}
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Targets(targets(ts)).
		Unit(unit).
		Span(width).
		Height(statHeight).
		GraphMode(common.BigValueGraphModeArea).
		ColorMode(common.BigValueColorModeValue).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)).
		Thresholds(dashboard.NewThresholdsConfigBuilder().
			Mode(dashboard.ThresholdsModeAbsolute).
			Steps([]dashboard.Threshold{{Color: "text"}}))
}

// heat is a heatmap of one histogram's bucket rates; the query must return Prometheus buckets (format
// heatmap), which Grafana turns into cells without recalculating them.
func heat(title, description string, width uint32, expr string) *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Targets(targets([]target{{expr: expr, legend: "{{le}}", heatmap: true}})).
		Span(width).
		Height(graphHeight).
		Calculate(false).
		Color(heatmap.NewHeatmapColorOptionsBuilder().
			Mode(heatmap.HeatmapColorModeScheme).
			Scheme("Spectral").
			Scale(heatmap.HeatmapColorScaleExponential).
			Exponent(0.5).
			Steps(64)).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s")).
		RowsFrame(heatmap.NewRowsHeatmapOptionsBuilder().Layout(common.HeatmapCellLayoutLe)).
		CellValues(heatmap.NewCellValuesBuilder().Unit("reqps")).
		ShowValue(common.VisibilityModeNever).
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(true)).
		ShowLegend()
}

// timeline is a state timeline of 0/1 series, shown as off and active.
func timeline(title, description string, width uint32, ts ...target) *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Targets(targets(ts)).
		Span(width).
		Height(graphHeight).
		ShowValue(common.VisibilityModeNever).
		MergeValues(true).
		FillOpacity(80).
		Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
			Type: dashboard.MappingTypeValueToText,
			Options: map[string]dashboard.ValueMappingResult{
				"0": {Text: cog.ToPtr("off"), Color: cog.ToPtr("transparent"), Index: cog.ToPtr[int32](0)},
				"1": {Text: cog.ToPtr("active"), Color: cog.ToPtr("red"), Index: cog.ToPtr[int32](1)},
			},
		}}}).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeSingle).
			Sort(common.SortOrderNone))
}

// row starts a titled row.
func row(title string) *dashboard.RowBuilder {
	return dashboard.NewRowBuilder(title)
}
