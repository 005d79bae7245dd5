package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/bench/harnessmetrics"
	"github.com/tunnelbench/tunnelbench/core/metrics"
)

// DefaultMetricsListen is where the dashboards' Prometheus config expects the harness.
const DefaultMetricsListen = "127.0.0.1:8160"

// MetricsServer serves, on one /metrics, the harness's own metrics (tunnelbench_*) and those of every
// kas of the in-process topology it runs, each labelled kas="<index>", so that the dashboards work on a
// harness run as on a real deployment.
type MetricsServer struct {
	provider *metrics.Provider
	// Metrics records the harness's own series.
	Metrics *harnessmetrics.Metrics
	srv     *http.Server
	lis     net.Listener
	done    chan struct{}

	mu       sync.Mutex
	attached map[int]attachedGatherer
	next     int
}

type attachedGatherer struct {
	label, value string
	g            prometheus.Gatherer
}

// StartMetricsServer listens on addr and serves /metrics until Close.
func StartMetricsServer(addr string) (*MetricsServer, error) {
	mp, err := metrics.New(metrics.WithRuntimeMetrics())
	if err != nil {
		return nil, err
	}
	hm, err := harnessmetrics.New(mp)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	m := &MetricsServer{provider: mp, Metrics: hm, lis: l, done: make(chan struct{}), attached: map[int]attachedGatherer{}}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.GathererFunc(m.gather), promhttp.HandlerOpts{}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(l)
	}()
	return m, nil
}

// Addr is the listening address.
func (m *MetricsServer) Addr() net.Addr { return m.lis.Addr() }

// Attach adds g's metrics, each with the label name=value, until the returned function is called.
func (m *MetricsServer) Attach(name, value string, g prometheus.Gatherer) (detach func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.next
	m.next++
	m.attached[id] = attachedGatherer{label: name, value: value, g: g}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.attached, id)
	}
}

func (m *MetricsServer) gather() ([]*dto.MetricFamily, error) {
	own, err := m.provider.Registry().Gather()
	if err != nil {
		return nil, err
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range own {
		byName[f.GetName()] = f
	}
	m.mu.Lock()
	attached := make([]attachedGatherer, 0, len(m.attached))
	for _, a := range m.attached {
		attached = append(attached, a)
	}
	m.mu.Unlock()
	var errs []error
	for _, a := range attached {
		fams, err := a.g.Gather()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range fams {
			for _, mt := range f.GetMetric() {
				mt.Label = append(mt.Label, &dto.LabelPair{Name: proto.String(a.label), Value: proto.String(a.value)})
			}
			have, ok := byName[f.GetName()]
			if !ok {
				byName[f.GetName()] = f
				continue
			}
			if have.GetType() != f.GetType() {
				continue // a name clash between the harness and a kas: keep the harness's
			}
			have.Metric = append(have.Metric, f.GetMetric()...)
		}
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, errors.Join(errs...)
}

// Close stops serving.
func (m *MetricsServer) Close() {
	_ = m.srv.Close()
	<-m.done
	_ = m.provider.Shutdown(context.Background())
}
