package tunnels

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Kind is what an adapter is to the comparison.
type Kind int

// Kinds, in the order lists and reports put them.
const (
	// KindProject is this project's tunnel in one of its modes.
	KindProject Kind = iota
	// KindPeer is another reverse tunnel, measured beside it.
	KindPeer
	// KindReference is no tunnel, but more than the baseline: a path whose cost a tunnel's path stands on
	// (grpc-proxy: the two gRPC hops of tunnel-public). Runs measure it by default, to show that floor.
	KindReference
	// KindBaseline is no tunnel at all: what the others are divided by.
	KindBaseline
)

func (k Kind) String() string {
	switch k {
	case KindProject:
		return "project"
	case KindPeer:
		return "peer"
	case KindReference:
		return "reference"
	case KindBaseline:
		return "baseline"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Registration is one adapter and what lists and reports say about it.
type Registration struct {
	// Name selects the adapter (--tunnels); lower case letters, digits and dashes.
	Name string
	Kind Kind
	// About says in one line what it is: the module and version for a peer, the mode for ours.
	About   string
	Adapter Adapter
}

// AllList is the list that selects every project, peer and reference adapter.
const AllList = "all"

var (
	registryMu sync.RWMutex
	registry   = map[string]Registration{}
	validName  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
)

// Register adds an adapter, usually from an init func of the file that implements it. A second
// registration of a name, an invalid name or a nil adapter is a programming error: it panics, as
// database/sql.Register does.
func Register(r Registration) {
	registryMu.Lock()
	defer registryMu.Unlock()
	switch {
	case !validName.MatchString(r.Name) || r.Name == AllList:
		panic(fmt.Sprintf("tunnels: invalid adapter name %q", r.Name))
	case r.Adapter == nil:
		panic(fmt.Sprintf("tunnels: adapter %q is nil", r.Name))
	}
	if _, dup := registry[r.Name]; dup {
		panic(fmt.Sprintf("tunnels: adapter %q registered twice", r.Name))
	}
	registry[r.Name] = r
}

// Lookup returns the adapter registered as name.
func Lookup(name string) (Registration, error) {
	registryMu.RLock()
	r, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		return Registration{}, fmt.Errorf("unknown tunnel %q (registered: %s)", name, strings.Join(Names(), ", "))
	}
	return r, nil
}

// Registered lists every adapter: by kind (project, peer, reference, baseline), then by name.
func Registered() []Registration {
	registryMu.RLock()
	out := make([]Registration, 0, len(registry))
	for _, r := range registry {
		out = append(out, r)
	}
	registryMu.RUnlock()
	slices.SortFunc(out, func(a, b Registration) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Names lists every adapter's name, in Registered's order.
func Names() []string {
	var out []string
	for _, r := range Registered() {
		out = append(out, r.Name)
	}
	return out
}

// Default lists this project's modes and the references: what a run measures unless told otherwise.
func Default() []string { return namesOf(KindProject, KindReference) }

// All lists this project's modes, every peer and the references; the baseline is not in it (a run
// measures it anyway).
func All() []string { return namesOf(KindProject, KindPeer, KindReference) }

func namesOf(kinds ...Kind) []string {
	var out []string
	for _, r := range Registered() {
		if slices.Contains(kinds, r.Kind) {
			out = append(out, r.Name)
		}
	}
	return out
}

// ParseList parses a --tunnels value: "all", or registered names separated by commas, each once.
func ParseList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == AllList {
		return All(), nil
	}
	if s == "" {
		return nil, fmt.Errorf("empty list of tunnels: want %s or names among %s", AllList, strings.Join(Names(), ", "))
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		name := strings.TrimSpace(f)
		if name == AllList {
			return nil, fmt.Errorf("%q: %s stands alone, not in a list", s, AllList)
		}
		if _, err := Lookup(name); err != nil {
			return nil, err
		}
		if slices.Contains(out, name) {
			return nil, fmt.Errorf("tunnel %q listed twice", name)
		}
		out = append(out, name)
	}
	return out, nil
}
