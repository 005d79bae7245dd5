package bench

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
)

// Path is the way a case's calls reach the demo service.
type Path string

// Paths.
const (
	// PathDirect calls the service with no tunnel: the baseline every tunneled case is compared with.
	PathDirect Path = "direct"
	// PathTunnel calls through kas from inside the kas process (the internal API).
	PathTunnel Path = "tunnel"
	// PathTunnelPublic calls through kas's public API over the topology's transport.
	PathTunnelPublic Path = "tunnel-public"
	// PathTunnel2Hop calls from inside a kas that holds no tunnel for the agent: the call goes to the kas
	// that does over the private API (two hops).
	PathTunnel2Hop Path = "tunnel-2hop"
	// PathTunnelSingleUse calls like PathTunnel, to an agent whose tunnels carry one call each (the
	// protocol's first version): what tunnel reuse buys, measured in the same run.
	PathTunnelSingleUse Path = "tunnel-single-use"
)

// ParsePath parses a path name.
func ParsePath(s string) (Path, error) {
	switch p := Path(s); p {
	case PathDirect, PathTunnel, PathTunnelPublic, PathTunnel2Hop, PathTunnelSingleUse:
		return p, nil
	}
	return "", fmt.Errorf("unknown path %q (want direct, tunnel, tunnel-public, tunnel-2hop or tunnel-single-use)", s)
}

// ShapeSpec is a shape with its payload size.
type ShapeSpec struct {
	Shape   load.Shape
	Payload int
}

func (s ShapeSpec) String() string { return string(s.Shape) + "-" + FormatBytes(s.Payload) }

// ParseShapeSpec parses "unary-64B", "server-stream-64KiB", "sleep".
func ParseShapeSpec(s string) (ShapeSpec, error) {
	if s == string(load.ShapeSleep) {
		return ShapeSpec{Shape: load.ShapeSleep}, nil
	}
	i := strings.LastIndex(s, "-")
	if i < 0 {
		return ShapeSpec{}, fmt.Errorf("shape %q: want SHAPE-SIZE, for example unary-64B", s)
	}
	sh, err := load.ParseShape(s[:i])
	if err != nil {
		return ShapeSpec{}, err
	}
	n, err := ParseBytes(s[i+1:])
	if err != nil {
		return ShapeSpec{}, err
	}
	return ShapeSpec{Shape: sh, Payload: n}, nil
}

// Case is one cell of the matrix.
type Case struct {
	Spec        ShapeSpec
	Concurrency int
	Path        Path
	// Adapter, when set, is the tunnel (a bench/tunnels adapter other than this project's) the case's
	// calls go through; Path is then PathTunnel: the caller sits in the tunnel server's process, the
	// one shape every peer has.
	Adapter string
}

// Name is the case's stable name: shape-size/cN/path, or shape-size/cN/adapter.
func (c Case) Name() string {
	last := string(c.Path)
	if c.Adapter != "" {
		last = c.Adapter
	}
	return fmt.Sprintf("%s/c%d/%s", c.Spec, c.Concurrency, last)
}

// Tunnel is the --tunnels name of what the case measures.
func (c Case) Tunnel() string {
	if c.Adapter != "" {
		return c.Adapter
	}
	return PathTunnelName(c.Path)
}

// PathTunnelName is the tunnel a path of this project's topology measures (a bench/tunnels name):
// tunnel-single-use for that path, direct for the direct paths, tunnel (this project's tunnel as it
// ships) for the others.
func PathTunnelName(p Path) string {
	switch p {
	case PathDirect, PathHTTPDirect:
		return tunnels.Direct
	case PathHTTPProxy:
		return string(PathHTTPProxy) // the HTTP reference: no bench/tunnels adapter, no tunnel
	case PathTunnelSingleUse:
		return tunnels.SingleUse
	}
	return tunnels.Reuse
}

// Group is the cases that share shape and concurrency: a direct baseline and its tunneled pairs.
type Group struct {
	Spec        ShapeSpec
	Concurrency int
	Paths       []Path
	// Adapters are the tunnels measured through bench/tunnels adapters, after the paths.
	Adapters []string
}

// Cases lists the group's cases: direct first, then the other paths, then the adapters.
func (g Group) Cases() []Case {
	out := make([]Case, 0, len(g.Paths)+len(g.Adapters))
	for _, p := range g.Paths {
		out = append(out, Case{Spec: g.Spec, Concurrency: g.Concurrency, Path: p})
	}
	for _, a := range g.Adapters {
		out = append(out, Case{Spec: g.Spec, Concurrency: g.Concurrency, Path: PathTunnel, Adapter: a})
	}
	return out
}

// Matrix is every axis of a run.
type Matrix struct {
	Paths       []Path
	Shapes      []ShapeSpec
	Concurrency []int
	// Filter keeps only cases whose name matches; nil keeps all. A tunneled case always keeps its direct
	// pair, so that its ratio can be computed.
	Filter *regexp.Regexp
	// NoDirect runs no direct baseline (a --target deployment whose service is not reachable directly):
	// tunneled cases then have no ratio.
	NoDirect bool
	// Adapters are tunnels measured through bench/tunnels adapters (peers, or yours), each on every
	// shape and concurrency, in turns with the paths and against the same direct baseline.
	Adapters []string
}

// Groups expands the matrix into groups, in run order.
func (m Matrix) Groups() []Group {
	var out []Group
	for _, s := range m.Shapes {
		for _, c := range m.Concurrency {
			g := Group{Spec: s, Concurrency: c}
			for _, p := range m.Paths {
				if p == PathDirect {
					continue
				}
				if m.Filter == nil || m.Filter.MatchString(Case{Spec: s, Concurrency: c, Path: p}.Name()) {
					g.Paths = append(g.Paths, p)
				}
			}
			for _, a := range m.Adapters {
				if m.Filter == nil || m.Filter.MatchString(Case{Spec: s, Concurrency: c, Path: PathTunnel, Adapter: a}.Name()) {
					g.Adapters = append(g.Adapters, a)
				}
			}
			tunneled := len(g.Paths) + len(g.Adapters)
			direct := Case{Spec: s, Concurrency: c, Path: PathDirect}
			wantDirect := tunneled > 0 || (m.Filter == nil || m.Filter.MatchString(direct.Name()))
			if !wantDirect || !containsPath(m.Paths, PathDirect) && tunneled == 0 {
				continue
			}
			if !m.NoDirect {
				g.Paths = append([]Path{PathDirect}, g.Paths...)
			}
			if len(g.Paths)+len(g.Adapters) > 0 {
				out = append(out, g)
			}
		}
	}
	return out
}

func containsPath(ps []Path, p Path) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// DefaultMatrix is the default run.
func DefaultMatrix() Matrix {
	return Matrix{
		Paths: []Path{PathDirect, PathTunnel, PathTunnelPublic, PathTunnel2Hop, PathTunnelSingleUse},
		Shapes: []ShapeSpec{
			{load.ShapeUnary, 64}, {load.ShapeUnary, 1 << 10}, {load.ShapeUnary, 1 << 20},
			{load.ShapeServerStream, 64 << 10}, {load.ShapeBidi, 1 << 10},
		},
		Concurrency: []int{1, 16, 64},
	}
}

// QuickMatrix is the --quick run: the headline cases only.
func QuickMatrix() Matrix {
	return Matrix{
		Paths:       []Path{PathDirect, PathTunnel, PathTunnelPublic, PathTunnel2Hop, PathTunnelSingleUse},
		Shapes:      []ShapeSpec{{load.ShapeUnary, 64}, {load.ShapeUnary, 1 << 20}},
		Concurrency: []int{1, 16},
	}
}

// NeedsSingleUseAgent reports whether the matrix measures single-use tunnels.
func (m Matrix) NeedsSingleUseAgent() bool { return containsPath(m.Paths, PathTunnelSingleUse) }

// NeedsKas is how many kas instances the matrix needs: two for the two-hop path.
func (m Matrix) NeedsKas() int {
	if containsPath(m.Paths, PathTunnel2Hop) {
		return 2
	}
	return 1
}
