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
