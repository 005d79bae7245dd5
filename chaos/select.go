package chaos

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Select picks the instances a fault acts on. At most one field is set; the zero Select picks all.
//
// On proxies, instances are grouped by the first part of their name (before any "/"): the agent of
// an agent->kas proxy, the kas of a kas-side proxy. Count and Fraction pick the first groups in the
// order they were added; Agents picks the groups AgentName(id); Kas picks the proxies whose name
// ends with KasName(i) (the destination kas of a pair name).
type Select struct {
	// Count picks the first Count instances.
	Count int
	// Fraction picks the first ceil(Fraction × n) instances, at least one; 0 < Fraction <= 1.
	Fraction float64
	// Kas picks kas indices (0-based).
	Kas []int
	// Agents picks agent ids.
	Agents []int64
}

// IsZero reports whether s picks everything.
func (s Select) IsZero() bool {
	return s.Count == 0 && s.Fraction == 0 && len(s.Kas) == 0 && len(s.Agents) == 0
}

// Validate checks that at most one field is set and that it is in range.
func (s Select) Validate() error {
	set := 0
	for _, b := range []bool{s.Count != 0, s.Fraction != 0, len(s.Kas) > 0, len(s.Agents) > 0} {
		if b {
			set++
		}
	}
	var errs []error
	if set > 1 {
		errs = append(errs, errors.New("select at most one of count, fraction, kas and agents"))
	}
	if s.Count < 0 {
		errs = append(errs, fmt.Errorf("count must be positive, got %d", s.Count))
	}
	if s.Fraction < 0 || s.Fraction > 1 || math.IsNaN(s.Fraction) {
		errs = append(errs, fmt.Errorf("fraction must be in (0, 1], got %v", s.Fraction))
	}
	for _, k := range s.Kas {
		if k < 0 {
			errs = append(errs, fmt.Errorf("kas index must not be negative, got %d", k))
		}
	}
	for _, a := range s.Agents {
		if a < 1 {
			errs = append(errs, fmt.Errorf("agent ids start at 1, got %d", a))
		}
	}
	return errors.Join(errs...)
}

// N is how many of n instances Count or Fraction picks (n when neither is set).
func (s Select) N(n int) int {
	switch {
	case s.Count > 0:
		return min(s.Count, n)
	case s.Fraction > 0:
		// The small epsilon keeps 0.3 × 10 at 3, not 4.
		return max(1, min(n, int(math.Ceil(s.Fraction*float64(n)-1e-9))))
	}
	return n
}

// String describes s for error messages.
func (s Select) String() string {
	switch {
	case s.Count > 0:
		return fmt.Sprintf("count %d", s.Count)
	case s.Fraction > 0:
		return fmt.Sprintf("fraction %v", s.Fraction)
	case len(s.Kas) > 0:
		return fmt.Sprintf("kas %v", s.Kas)
	case len(s.Agents) > 0:
		return fmt.Sprintf("agents %v", s.Agents)
	}
	return "all"
}

// PickAgents returns the agents of all (in order) that s picks. Kas is not a valid selection of
// agents; naming an agent that is not in all is an error.
func (s Select) PickAgents(all []int64) ([]int64, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if len(s.Kas) > 0 {
		return nil, errors.New("agents cannot be selected by kas")
	}
	if len(s.Agents) > 0 {
		known := make(map[int64]bool, len(all))
		for _, id := range all {
			known[id] = true
		}
		for _, id := range s.Agents {
			if !known[id] {
				return nil, fmt.Errorf("no agent %d (agents are %s)", id, idRange(all))
			}
		}
		return slices.Clone(s.Agents), nil
	}
	if len(all) == 0 {
		return nil, errors.New("there are no agents")
	}
	return slices.Clone(all[:s.N(len(all))]), nil
}

// PickKas returns the kas indices of 0..n-1 that s picks. Agents is not a valid selection of kas.
func (s Select) PickKas(n int) ([]int, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if len(s.Agents) > 0 {
		return nil, errors.New("kas cannot be selected by agents")
	}
	if len(s.Kas) > 0 {
		for _, k := range s.Kas {
			if k >= n {
				return nil, fmt.Errorf("no kas %d (kas indices are 0..%d)", k, n-1)
			}
		}
		return slices.Clone(s.Kas), nil
	}
	if n == 0 {
		return nil, errors.New("there is no kas")
	}
	out := make([]int, s.N(n))
	for i := range out {
		out[i] = i
	}
	return out, nil
}

func (s Select) proxies(all []*Proxy) ([]*Proxy, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, errors.New("the link has no proxies")
	}
	var out []*Proxy
	switch {
	case len(s.Kas) > 0:
		for _, k := range s.Kas {
			suffix, n := KasName(k), len(out)
			for _, p := range all {
				if p.name == suffix || strings.HasSuffix(p.name, "/"+suffix) {
					out = append(out, p)
				}
			}
			if len(out) == n {
				return nil, fmt.Errorf("no proxy leads to %s", suffix)
			}
		}
	case len(s.Agents) > 0:
		for _, id := range s.Agents {
			name, n := AgentName(id), len(out)
			for _, p := range all {
				if group(p.name) == name {
					out = append(out, p)
				}
			}
			if len(out) == n {
				return nil, fmt.Errorf("no proxy of %s", name)
			}
		}
	default:
		var groups []string
		for _, p := range all {
			if g := group(p.name); !slices.Contains(groups, g) {
				groups = append(groups, g)
			}
		}
		groups = groups[:s.N(len(groups))]
		for _, p := range all {
			if slices.Contains(groups, group(p.name)) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func group(name string) string {
	g, _, _ := strings.Cut(name, "/")
	return g
}

func idRange(ids []int64) string {
	if len(ids) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d..%d", slices.Min(ids), slices.Max(ids))
}
