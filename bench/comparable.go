package bench

import (
	"fmt"
	"strings"
)

// busyLoad is the load average per CPU above which a run is said to have shared its machine: more
// runnable threads than half the CPUs before the run even started.
const busyLoad = 0.5

// comparability says whether two runs measured the same way on the same kind of machine. Refusals are
// differences that make their figures incomparable (another machine, other durations or rounds,
// another topology or deployment); warnings are differences worth knowing that do not (load, Go and
// gRPC versions, settings a v1 run did not record).
func comparability(old, new *Summary) (refusals, warnings []string) {
	refuse := func(what string, o, n any) {
		refusals = append(refusals, fmt.Sprintf("%s %v → %v", what, o, n))
	}
	oe, ne := old.Env, new.Env
	if oe.OS != ne.OS || oe.Arch != ne.Arch {
		refuse("platform", oe.OS+"/"+oe.Arch, ne.OS+"/"+ne.Arch)
	}
	if oe.CPUModel != ne.CPUModel && oe.CPUModel != "" && ne.CPUModel != "" {
		refuse("CPU", curlyQuoted(oe.CPUModel), curlyQuoted(ne.CPUModel))
	}
	if oe.CPUs != ne.CPUs {
		refuse("CPUs", oe.CPUs, ne.CPUs)
	}
	if oe.GOMAXPROCS != ne.GOMAXPROCS {
		refuse("GOMAXPROCS", oe.GOMAXPROCS, ne.GOMAXPROCS)
	}
	switch {
	case oe.Kernel != "" && ne.Kernel != "" && oe.Kernel != ne.Kernel:
		refuse("kernel", oe.Kernel, ne.Kernel)
	case oe.Kernel == "" || ne.Kernel == "":
		warnings = append(warnings, "a run does not record its kernel: the machines may differ in it")
	}
	if oe.Go != ne.Go {
		warnings = append(warnings, fmt.Sprintf("Go %s → %s", oe.Go, ne.Go))
	}
	if oe.GRPC != ne.GRPC {
		warnings = append(warnings, fmt.Sprintf("gRPC %s → %s", oe.GRPC, ne.GRPC))
	}
	for _, r := range []struct {
		name string
		e    Env
	}{{"old", oe}, {"new", ne}} {
		if len(r.e.LoadAvg) > 0 && r.e.CPUs > 0 && r.e.LoadAvg[0] > busyLoad*float64(r.e.CPUs) {
			warnings = append(warnings, fmt.Sprintf("the %s run started on a busy machine (load average %.2f on %d CPUs): other work competed with it",
				r.name, r.e.LoadAvg[0], r.e.CPUs))
		}
	}

	so, sn := old.Settings, new.Settings
	if so == nil || sn == nil {
		which := "old"
		if sn == nil {
			which = "new"
		}
		warnings = append(warnings, fmt.Sprintf("the %s run does not record its settings (schema v1): check by hand that it ran with the same duration, warm-up, rounds and topology", which))
		return refusals, warnings
	}
	if so.WarmupS != sn.WarmupS {
		refuse("warm-up", seconds(so.WarmupS), seconds(sn.WarmupS))
	}
	if so.DurationS != sn.DurationS {
		refuse("duration", seconds(so.DurationS), seconds(sn.DurationS))
	}
	if so.Rounds != sn.Rounds {
		refuse("rounds", so.Rounds, sn.Rounds)
	}
	if so.Topology != sn.Topology {
		refuse("topology", so.Topology, sn.Topology)
	}
	if so.Transport != sn.Transport {
		refuse("transport", orNone(so.Transport), orNone(sn.Transport))
	}
	if so.TunnelsPerAgent != sn.TunnelsPerAgent {
		refuse("tunnels per agent", so.TunnelsPerAgent, sn.TunnelsPerAgent)
	}
	if so.HTTPRate > 0 && sn.HTTPRate > 0 && so.HTTPRate != sn.HTTPRate {
		refuse("HTTP rate", so.HTTPRate, sn.HTTPRate)
	}
	if ot, nt := targetText(so.Target), targetText(sn.Target); ot != nt {
		refuse("target", ot, nt)
	}
	// Kas and agents follow from the paths a run measures (two kas for tunnel-2hop): other paths
	// change them without changing the cases both runs have.
	if so.Kas != sn.Kas || so.Agents != sn.Agents {
		warnings = append(warnings, fmt.Sprintf("kas × agents %d × %d → %d × %d (the paths differ)", so.Kas, so.Agents, sn.Kas, sn.Agents))
	}
	return refusals, warnings
}

func curlyQuoted(s string) string { return "“" + s + "”" }

func seconds(s float64) string { return fmt.Sprintf("%gs", s) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// targetText is what identifies a target deployment and how it was reached; "none" for a topology the
// run started itself.
func targetText(t *TargetSettings) string {
	if t == nil {
		return "none"
	}
	parts := []string{t.Address, fmt.Sprintf("agent %d", t.Agent)}
	if t.TLS {
		parts = append(parts, "TLS")
	}
	if t.Direct != "" {
		parts = append(parts, "direct "+t.Direct)
	}
	return strings.Join(parts, ", ")
}
