package bench

import (
	"testing"
	"time"
)

func TestProgressReporter(t *testing.T) {
	var got []Progress
	p := newProgressReporter(Options{Warmup: time.Second, Duration: 4 * time.Second, Progress: func(pr Progress) { got = append(got, pr) }}, 3)
	p.at(1, "unary-64B/c1")
	p.finished()
	want := []Progress{{Done: 1, Total: 3, Case: "unary-64B/c1", Left: 10 * time.Second}, {Done: 3, Total: 3}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("progress %+v, want %+v", got, want)
	}
	// Without Options.Progress nobody is told, and nothing fails.
	quiet := newProgressReporter(Options{}, 3)
	quiet.at(0, "x")
	quiet.finished()
}
