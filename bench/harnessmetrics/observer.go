package harnessmetrics

import (
	"time"

	"google.golang.org/grpc/codes"
)

// Observer feeds the calls of one scenario (or bench case) to m: it has the methods of bench/load's
// Observer, so that bench and chaos hook their load generators to the harness metrics the same way.
// With a nil m it records nothing.
type Observer struct {
	m        *Metrics
	scenario string
}

// Observer returns the observer of scenario's calls.
func (m *Metrics) Observer(scenario string) Observer { return Observer{m: m, scenario: scenario} }

// Offered counts n calls the generator meant to send (OfferedCallsMetric).
func (o Observer) Offered(n int) { o.m.Offered(o.scenario, n) }

// Call records one finished call (CallsMetric and CallDurationMetric).
func (o Observer) Call(d time.Duration, code codes.Code) { o.m.Call(o.scenario, d, code) }
