// Package harnessmetrics is the benchmark and chaos harness's own metrics: what the load generator meant
// to send, what came back and how fast, which faults are active, and how long recovery took.
//
// The metric names are a contract with the Grafana dashboards in dashboards/. The package only records;
// it never serves HTTP and never touches the Prometheus default registry.
package harnessmetrics

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/tunnelbench/tunnelbench/core/metrics"
)

// Metric names, as Prometheus exposes them.
const (
	OfferedCallsMetric = "tunnelbench_offered_calls_total"
	CallsMetric        = "tunnelbench_calls_total"
	CallDurationMetric = "tunnelbench_call_duration_seconds"
	FaultActiveMetric  = "tunnelbench_fault_active"
	RecoveryMetric     = "tunnelbench_recovery_seconds"
)

// DurationBuckets are the call duration histogram's bucket bounds in seconds: 1, 1.5, 2, 3, 5 and 7 per
// decade from 100 µs to 7 s, then 10, 15, 20, 30, 50 and 60 s. Neighbouring bounds are at most 1.5×
// apart, so a quantile interpolated inside a bucket is off by less than that; timeouts of up to a minute
// still land in a finite bucket.
var DurationBuckets = []float64{
	0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.0007,
	0.001, 0.0015, 0.002, 0.003, 0.005, 0.007,
	0.01, 0.015, 0.02, 0.03, 0.05, 0.07,
	0.1, 0.15, 0.2, 0.3, 0.5, 0.7,
	1, 1.5, 2, 3, 5, 7,
	10, 15, 20, 30, 50, 60,
}

// maxCode is the highest gRPC code that has a name; codes above it are recorded under Code(n).
const maxCode = codes.Unauthenticated

// Metrics records the harness's metrics. A nil *Metrics records nothing, so that code paths without
// metrics need no checks. Methods are safe for concurrent use.
//
// It uses prometheus/client_golang collectors directly rather than OpenTelemetry instruments: Call runs
// once per finished call on the load generator's hot path, and the label children of each scenario are
// looked up once and then cached, so that recording a call is a map read, an atomic load and two atomic
// updates, with no allocation. The names are also exactly the contract names, with no exporter
// translation in between.
type Metrics struct {
	offered  *prometheus.CounterVec
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	fault    *prometheus.GaugeVec
	recovery *prometheus.GaugeVec

	scenarios sync.Map // scenario name -> *scenario
}

// scenario is the cached label children of one scenario.
type scenario struct {
	offered  prometheus.Counter
	duration prometheus.Observer
	// calls are created on first use, so that dashboards list only the codes that happened.
	calls [maxCode + 1]atomic.Pointer[prometheus.Counter]
}

// New registers the harness metrics on p's registry.
func New(p *metrics.Provider) (*Metrics, error) {
	return NewOn(p.Registry())
}

// NewOn registers the harness metrics on reg. On error nothing stays registered.
func NewOn(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		offered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: OfferedCallsMetric,
			Help: "Calls the load generator meant to send, whether or not it managed to send them.",
		}, []string{"scenario"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: CallsMetric,
			Help: "Finished calls by gRPC code name (OK included).",
		}, []string{"scenario", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    CallDurationMetric,
			Help:    "Duration of finished calls as the caller saw them, whatever their code.",
			Buckets: DurationBuckets,
		}, []string{"scenario"}),
		fault: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: FaultActiveMetric,
			Help: "1 while a fault is injected on a link, 0 otherwise.",
		}, []string{"scenario", "link", "fault"}),
		recovery: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: RecoveryMetric,
			Help: "Seconds from the end of the last fault until the success rate was back.",
		}, []string{"scenario"}),
	}
	all := []prometheus.Collector{m.offered, m.calls, m.duration, m.fault, m.recovery}
	for i, c := range all {
		if err := reg.Register(c); err != nil {
			for _, done := range all[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register harness metrics: %w", err)
		}
	}
	return m, nil
}

// scenario returns the cached children of name, creating them on first use. The OK counter is created
// at once, so that rates and ratios see 0 rather than no data before the first call finishes.
func (m *Metrics) scenario(name string) *scenario {
	if s, ok := m.scenarios.Load(name); ok {
		return s.(*scenario)
	}
	s := &scenario{
		offered:  m.offered.WithLabelValues(name),
		duration: m.duration.WithLabelValues(name),
	}
	actual, loaded := m.scenarios.LoadOrStore(name, s)
	s = actual.(*scenario)
	if !loaded {
		m.callCounter(name, s, codes.OK)
	}
	return s
}

// callCounter returns the cached counter of code, creating it on first use. Two goroutines may create it
// at once; both get the same child from the vector, so either may win the store.
func (m *Metrics) callCounter(name string, s *scenario, code codes.Code) prometheus.Counter {
	if c := s.calls[code].Load(); c != nil {
		return *c
	}
	c := m.calls.WithLabelValues(name, code.String())
	s.calls[code].Store(&c)
	return c
}

// Offered counts n calls that the generator of scenario meant to send.
func (m *Metrics) Offered(scenario string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.scenario(scenario).offered.Add(float64(n))
}

// Call records one finished call of scenario: its duration and its gRPC code.
func (m *Metrics) Call(scenario string, d time.Duration, code codes.Code) {
	if m == nil {
		return
	}
	s := m.scenario(scenario)
	s.duration.Observe(d.Seconds())
	if code <= maxCode {
		m.callCounter(scenario, s, code).Inc()
		return
	}
	m.calls.WithLabelValues(scenario, code.String()).Inc()
}

// Fault marks fault (latency, reset, blackhole, ...) on link as active or not in scenario.
func (m *Metrics) Fault(scenario, link, fault string, active bool) {
	if m == nil {
		return
	}
	v := 0.0
	if active {
		v = 1
	}
	m.fault.WithLabelValues(scenario, link, fault).Set(v)
}

// Recovery records how long scenario took, after its last fault ended, until the success rate was back.
func (m *Metrics) Recovery(scenario string, d time.Duration) {
	if m == nil {
		return
	}
	m.recovery.WithLabelValues(scenario).Set(d.Seconds())
}

// NoRecovery removes scenario's recovery figure: it has not recovered (yet), and a figure from
// earlier in the run would say it had.
func (m *Metrics) NoRecovery(scenario string) {
	if m == nil {
		return
	}
	m.recovery.DeleteLabelValues(scenario)
}
