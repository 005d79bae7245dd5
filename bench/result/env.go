// Package result holds what bench and chaos summaries share: the machine and build a run ran on (Env)
// and latency percentiles (Latency), so that both kinds of results state them the same way.
//
// It only describes results; it never measures load or writes files.
package result

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Env records what a run ran on, so that figures are never read without their machine.
type Env struct {
	Go         string    `json:"go"`
	GRPC       string    `json:"grpc"`
	CPUs       int       `json:"cpus"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	OS         string    `json:"os"`
	Arch       string    `json:"arch"`
	CPUModel   string    `json:"cpu_model,omitempty"`
	GitCommit  string    `json:"git_commit"`
	StartedAt  time.Time `json:"started_at"`
	Quick      bool      `json:"quick,omitempty"`
	Target     string    `json:"target,omitempty"`

	// Kernel is the running kernel's release (Linux: /proc/sys/kernel/osrelease).
	Kernel string `json:"kernel,omitempty"`
	// LoadAvg is the machine's 1, 5 and 15 minute load average when the run started: how busy the
	// machine already was with other work. LoadAvgEnd is the same when the run ended (the run's own
	// load included); a run sets it with LoadAverage.
	LoadAvg    []float64 `json:"load_avg,omitempty"`
	LoadAvgEnd []float64 `json:"load_avg_end,omitempty"`
}

// CollectEnv describes this machine and build.
func CollectEnv(started time.Time) Env {
	e := Env{
		Go:         runtime.Version(),
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		CPUModel:   cpuModel(),
		Kernel:     kernel(),
		LoadAvg:    LoadAverage(),
		GitCommit:  gitCommit(),
		StartedAt:  started.UTC().Truncate(time.Second),
		GRPC:       "unknown",
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "google.golang.org/grpc" {
				e.GRPC = d.Version
			}
		}
	}
	return e
}

func gitCommit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		commit += "-dirty"
	}
	return commit
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// LoadAverage is the machine's 1, 5 and 15 minute load average, or nil where /proc/loadavg is not.
func LoadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	return parseLoadAvg(string(b))
}

// parseLoadAvg reads the first three fields of /proc/loadavg ("0.52 0.58 0.59 1/467 12345").
func parseLoadAvg(s string) []float64 {
	f := strings.Fields(s)
	if len(f) < 3 {
		return nil
	}
	out := make([]float64, 3)
	for i := range out {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || v < 0 {
			return nil
		}
		out[i] = v
	}
	return out
}
