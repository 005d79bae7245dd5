package tunclient

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tunclient/reconnect"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// gRPC's own reconnect backoff for the connection to kas is capped like the pool's: the agent is back
// within seconds of kas whichever of the two waits.
func TestGRPCReconnectBackoffCappedLikeThePool(t *testing.T) {
	if connectBackoff.MaxDelay != reconnect.DefaultBackoff.Max {
		t.Fatalf("gRPC reconnect cap %v, agent backoff cap %v: want them equal", connectBackoff.MaxDelay, reconnect.DefaultBackoff.Max)
	}
}

func TestConfigValidationReportsEveryProblem(t *testing.T) {
	_, err := New(Config{MinIdle: -1, MaxConnections: -5, MaxIdleTime: -time.Second, Backoff: reconnect.Backoff{Initial: 0, Max: 1, Factor: 0.5, Jitter: 2}})
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
		c.MaxIdleTime != DefaultMaxIdleTime || c.Backoff != reconnect.DefaultBackoff {
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
