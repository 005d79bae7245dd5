package result

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestLatencyOf(t *testing.T) {
	h := hdrhistogram.New(1, 1_000_000, 3)
	for v := int64(1); v <= 1000; v++ {
		_ = h.RecordValue(v)
	}
	got := LatencyOf(h)
	want := Latency{P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}
	if got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
	if (LatencyOf(hdrhistogram.New(1, 10, 3)) != Latency{}) {
		t.Error("an empty histogram has percentiles")
	}
}

// TestEnv: the environment names this build and keeps its JSON names, which both summary schemas use.
func TestEnv(t *testing.T) {
	started := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))
	e := CollectEnv(started)
	if e.Go != runtime.Version() || e.CPUs < 1 || e.GOMAXPROCS < 1 || e.GitCommit == "" || !e.StartedAt.Equal(started.Truncate(time.Second)) || e.StartedAt.Location() != time.UTC {
		t.Errorf("env %+v", e)
	}
	b, err := json.Marshal(Env{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"go"`, `"grpc"`, `"cpus"`, `"gomaxprocs"`, `"os"`, `"arch"`, `"git_commit"`, `"started_at"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("%s lacks %s", b, key)
		}
	}
}

// TestEnvMachine: on Linux the kernel and load average are read; the parser refuses what is not a load
// average.
func TestEnvMachine(t *testing.T) {
	if runtime.GOOS == "linux" {
		e := CollectEnv(time.Now())
		if e.Kernel == "" || len(e.LoadAvg) != 3 || len(LoadAverage()) != 3 {
			t.Errorf("kernel %q, load average %v", e.Kernel, e.LoadAvg)
		}
	}
	if got := parseLoadAvg("0.52 1.58 10.59 1/467 12345\n"); len(got) != 3 || got[0] != 0.52 || got[1] != 1.58 || got[2] != 10.59 {
		t.Errorf("parsed %v", got)
	}
	for _, bad := range []string{"", "0.5 0.6", "a b c", "1 -2 3"} {
		if got := parseLoadAvg(bad); got != nil {
			t.Errorf("%q parsed as %v", bad, got)
		}
	}
}
