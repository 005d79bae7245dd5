package scenario_test

import (
	"testing"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/chaos/scenario"
)

// The shapes a scenario may name are the load generators' call shapes.
func TestShapesAreBenchShapes(t *testing.T) {
	for _, s := range scenario.Shapes {
		if _, err := load.ParseShape(s); err != nil {
			t.Errorf("scenario shape %q: %v", s, err)
		}
	}
	if _, err := load.ParseShape(scenario.DefaultShape); err != nil {
		t.Error(err)
	}
}
