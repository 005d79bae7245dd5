// Package metrics wires the OpenTelemetry SDK meter provider to a Prometheus exporter on a private
// registry, and serves it over HTTP.
//
// It never registers anything on the Prometheus default registry: several kas and agents may share one
// process (the harness does that).
package metrics

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Provider is one process component's metrics: an OpenTelemetry meter provider whose readings appear on
// a private Prometheus registry.
type Provider struct {
	meterProvider *sdkmetric.MeterProvider
	registry      *prometheus.Registry
}

// Option configures New.
type Option func(*options)

type options struct {
	runtime     bool
	exponential []string
}

// WithRuntimeMetrics adds the Go runtime and process collectors (go_*, process_*). Use it once per
// process, on the provider that the process's /metrics serves.
func WithRuntimeMetrics() Option {
	return func(o *options) { o.runtime = true }
}

// Exponential histogram limits (WithExponentialHistograms). Prometheus serves native histograms at scale
// 8 at most (the exporter downscales finer ones); 512 buckets keep scale 4 or finer, each bucket
// 2^(1/16) wide so that a quantile is within 4.5%, while the values recorded over the process's life
// span up to 2^32 (1 µs to over an hour).
const (
	ExponentialMaxSize  = 512
	ExponentialMaxScale = 8
)

// WithExponentialHistograms aggregates the histogram instruments with these names as base-2 exponential
// histograms (Prometheus native histograms) instead of explicit buckets: an instrument recorded beside
// a bucketed one gets a resolution its buckets cannot give.
func WithExponentialHistograms(names ...string) Option {
	return func(o *options) { o.exponential = append(o.exponential, names...) }
}

// New returns a provider with its own registry.
func New(opts ...Option) (*Provider, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	reg := prometheus.NewRegistry()
	if o.runtime {
		if err := reg.Register(collectors.NewGoCollector()); err != nil {
			return nil, fmt.Errorf("register go collector: %w", err)
		}
		if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, fmt.Errorf("register process collector: %w", err)
		}
	}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mpOpts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	for _, name := range o.exponential {
		mpOpts = append(mpOpts, sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Name: name, Kind: sdkmetric.InstrumentKindHistogram},
			// Min and max would be over the process's life, not a scrape's: of no use.
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: ExponentialMaxSize, MaxScale: ExponentialMaxScale, NoMinMax: true}},
		)))
	}
	return &Provider{
		meterProvider: sdkmetric.NewMeterProvider(mpOpts...),
		registry:      reg,
	}, nil
}

// Meter returns a named meter.
func (p *Provider) Meter(name string) metric.Meter {
	return p.meterProvider.Meter(name)
}

// MeterProvider is the OpenTelemetry meter provider.
func (p *Provider) MeterProvider() metric.MeterProvider {
	return p.meterProvider
}

// Registry is the Prometheus registry the readings appear on. Register extra collectors here.
func (p *Provider) Registry() *prometheus.Registry {
	return p.registry
}

// Handler serves the registry in the Prometheus exposition formats.
func (p *Provider) Handler() http.Handler {
	return promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{Registry: p.registry})
}

// Shutdown stops the meter provider.
func (p *Provider) Shutdown(ctx context.Context) error {
	return p.meterProvider.Shutdown(ctx)
}
