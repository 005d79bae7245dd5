package bench

import (
	"fmt"
	"strings"

	"github.com/tunnelbench/tunnelbench/bench/tunnels"
)

// PathMeanings says what each path of bench measures, for --paths's help. TestPathsHelp (cmd/tunnelbench) fails when bench
// knows a path this does not explain.
var PathMeanings = map[Path]string{
	PathDirect:          "the demo service called directly, no tunnel: the baseline of every ratio",
	PathTunnel:          "through kas from inside its process (its in-process API)",
	PathTunnelPublic:    "through kas's public gRPC API, over the transport",
	PathTunnel2Hop:      "entering at a kas without the agent's tunnel: one more hop over the private API",
	PathTunnelSingleUse: "as tunnel, to an agent whose tunnels carry one call each (the protocol's first version)",
}

// PathsHelp is --paths's help: every path the default matrix runs, what it measures, and the defaults
// that --processes and --target change.
func PathsHelp() string {
	var b strings.Builder
	b.WriteString("comma-separated paths (default: all of them in process; direct, tunnel-public and tunnel-2hop\nwith --processes; direct and tunnel-public with --target). The paths:")
	for _, p := range DefaultMatrix().Paths {
		fmt.Fprintf(&b, "\n  %-18s %s", p, PathMeanings[p])
	}
	return b.String()
}

// TunnelsHelp is --tunnels's help: every registered tunnel and what it is.
func TunnelsHelp() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tunnels to measure side by side, each on every case against the same direct baseline: %s\n"+
		"(this project's modes, every peer and the references), or names separated by commas (default: %s).\n"+
		"This project's tunnel runs on --paths; the peers with the caller in their server's process, as on\n"+
		"the tunnel path; a reference (no tunnel) with its caller over loopback TCP, as on tunnel-public;\n"+
		"direct is the baseline, which every run measures. The tunnels:", tunnels.AllList, strings.Join(tunnels.Default(), ","))
	for _, r := range tunnels.Registered() {
		fmt.Fprintf(&b, "\n  %-22s %s", r.Name, r.About)
	}
	return b.String()
}
