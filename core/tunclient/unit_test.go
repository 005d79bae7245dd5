package tunclient

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestBackoffGrowsWithJitterUpToMax(t *testing.T) {
	b := newBackoffState(DefaultBackoff)
	want := []time.Duration{time.Second, 1600 * time.Millisecond, 2560 * time.Millisecond}
	for i, w := range want {
		d := b.wait()
		if lo, hi := time.Duration(float64(w)*0.8), time.Duration(float64(w)*1.2); d < lo || d > hi {
			t.Fatalf("wait %d = %v, want within [%v, %v]", i, d, lo, hi)
		}
	}
	for range 20 {
		if d := b.wait(); d > 6*time.Second {
			t.Fatalf("wait %v above max+jitter", d)
		}
	}
	b.reset()
	if d := b.wait(); d > 1200*time.Millisecond {
		t.Fatalf("after reset: %v", d)
	}
}

// After a long outage (a minute of failed reconnects) the next wait is still at most the cap and its
// jitter: the agent is back within seconds of kas, not the 18.6 s a 20 s cap gave.
func TestBackoffAfterLongOutageIsCapped(t *testing.T) {
	b := newBackoffState(DefaultBackoff)
	limit := time.Duration(float64(DefaultBackoff.Max) * (1 + DefaultBackoff.Jitter))
	var outage time.Duration
	for outage < time.Hour {
		d := b.wait()
		if d > limit {
			t.Fatalf("wait %v after %v of outage, above the cap of %v (+%g jitter)", d, outage, DefaultBackoff.Max, DefaultBackoff.Jitter)
		}
		outage += d
	}
	if DefaultBackoff.Max > 5*time.Second || connectBackoff.MaxDelay != DefaultBackoff.Max {
		t.Fatalf("agent backoff cap %v, gRPC reconnect cap %v: want both at most 5s", DefaultBackoff.Max, connectBackoff.MaxDelay)
	}
}

func TestJitterNeverPanics(t *testing.T) {
	for _, j := range []float64{0, -1, 1e-12} {
		if d := jittered(time.Second, j); d < 0 {
			t.Fatalf("jitter %v: %v", j, d)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, 1} {
		if got := upTo(d); got < 0 || (d > 0 && got >= d) {
			t.Fatalf("upTo(%v) = %v", d, got)
		}
	}
	if d := jittered(0, 0.2); d != 0 {
		t.Fatalf("jittered(0) = %v", d)
	}
}

func TestConfigValidationReportsEveryProblem(t *testing.T) {
	_, err := New(Config{MinIdle: -1, MaxConnections: -5, MaxIdleTime: -time.Second, Backoff: Backoff{Initial: 0, Max: 1, Factor: 0.5, Jitter: 2}})
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"kas connection is required", "min idle", "max connections", "max idle time", "backoff needs", "backoff factor", "backoff jitter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	conn, err := grpc.NewClient("passthrough:unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	a, err := New(Config{KasConn: conn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	c := a.cfg
	if c.MinIdle != DefaultMinIdle || c.MaxConnections != DefaultMaxConnections || c.ScaleUpStep != DefaultScaleUpStep ||
		c.MaxIdleTime != DefaultMaxIdleTime || c.Backoff != DefaultBackoff {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if _, err := New(Config{KasConn: conn, MinIdle: 10, MaxConnections: 5}); err == nil {
		t.Fatal("min idle above max connections accepted")
	}
}

func TestDescriptorListsRegisteredServicesAndExposed(t *testing.T) {
	conn, err := grpc.NewClient("passthrough:unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	a, err := New(Config{KasConn: conn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	if err := a.Expose("up.Stream", conn); err != nil {
		t.Fatal(err)
	}
	if err := a.Expose("grpc.health.v1.Health", conn); err == nil {
		t.Fatal("exposing a registered service was accepted")
	}
	d := descriptorFor(a.GetServiceInfo(), []string{"up.Stream"}).GetAgentDescriptor()
	names := map[string]bool{}
	for _, s := range d.GetServices() {
		names[s.GetName()] = true
		if s.GetName() == "up.Stream" && !s.GetAllMethods() {
			t.Error("exposed service not advertised with all methods")
		}
		if s.GetName() == "grpc.health.v1.Health" && len(s.GetMethods()) == 0 {
			t.Error("health service without methods")
		}
	}
	for _, want := range []string{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection", "up.Stream"} {
		if !names[want] {
			t.Errorf("descriptor lacks %s: %v", want, names)
		}
	}
}
