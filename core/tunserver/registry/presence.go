package registry

import (
	"reflect"
	"slices"
)

// Presence is what this kas knows of an agent for one method: whether the tunnels the agent holds here
// announced it in their descriptors.
type Presence int

const (
	// AgentAbsent: the agent has no tunnel on this kas (one in its handshake does not count).
	AgentAbsent Presence = iota
	// MethodServed: at least one of the agent's tunnels here, idle or busy, announced the method.
	MethodServed
	// MethodUnserved: the agent has tunnels here, and none of them announced the method.
	MethodUnserved
)

func (p Presence) String() string {
	switch p {
	case AgentAbsent:
		return "absent"
	case MethodServed:
		return "served"
	case MethodUnserved:
		return "unserved"
	default:
		return "Presence(?)"
	}
}

// Presence reports whether the agent's tunnels on this kas serve the method. Busy tunnels count: a call
// that waits for one of them is served once it is idle again.
func (r *Registry) Presence(agentID int64, service, method string) Presence {
	s := r.stripe(agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.agents[agentID]
	if e == nil || e.tunnels == 0 {
		return AgentAbsent
	}
	for _, d := range e.descs {
		if d.index.supports(service, method) {
			return MethodServed
		}
	}
	return MethodUnserved
}

// descCount is one descriptor of an agent's tunnels and how many of them sent it.
type descCount struct {
	index DescriptorIndex
	n     int
}

// sameIndex reports whether two indexes are one: agentapi's descriptor cache hands every tunnel that
// sent the same bytes the same index, so that comparing its map is enough (and cheap). Two equal
// descriptors indexed apart count twice, which changes no answer of Presence.
func sameIndex(a, b DescriptorIndex) bool {
	return a.Reuse == b.Reuse && reflect.ValueOf(a.services).UnsafePointer() == reflect.ValueOf(b.services).UnsafePointer()
}

// addDesc and removeDesc keep descs in step with tunnels; the stripe lock must be held.
func (e *agentEntry) addDesc(d DescriptorIndex) {
	for i := range e.descs {
		if sameIndex(e.descs[i].index, d) {
			e.descs[i].n++
			return
		}
	}
	e.descs = append(e.descs, descCount{index: d, n: 1})
}

func (e *agentEntry) removeDesc(d DescriptorIndex) {
	for i := range e.descs {
		if sameIndex(e.descs[i].index, d) {
			if e.descs[i].n--; e.descs[i].n == 0 {
				e.descs = slices.Delete(e.descs, i, i+1) // clears the tail: no index kept alive
			}
			return
		}
	}
}
