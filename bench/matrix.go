package bench

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tunnelbench/tunnelbench/bench/load"
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
}

// Name is the case's stable name: shape-size/cN/path.
func (c Case) Name() string {
	return fmt.Sprintf("%s/c%d/%s", c.Spec, c.Concurrency, c.Path)
}

// Group is the cases that share shape and concurrency: a direct baseline and its tunneled pairs.
type Group struct {
	Spec        ShapeSpec
	Concurrency int
	Paths       []Path
}

// Cases lists the group's cases, direct first.
func (g Group) Cases() []Case {
	out := make([]Case, 0, len(g.Paths))
	for _, p := range g.Paths {
		out = append(out, Case{Spec: g.Spec, Concurrency: g.Concurrency, Path: p})
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
			direct := Case{Spec: s, Concurrency: c, Path: PathDirect}
			wantDirect := len(g.Paths) > 0 || (m.Filter == nil || m.Filter.MatchString(direct.Name()))
			if !wantDirect || !containsPath(m.Paths, PathDirect) && len(g.Paths) == 0 {
				continue
			}
			if !m.NoDirect {
				g.Paths = append([]Path{PathDirect}, g.Paths...)
			}
			if len(g.Paths) > 0 {
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
