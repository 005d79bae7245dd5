package registry

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
	if e.descs.Supports(service, method) {
		return MethodServed
	}
	return MethodUnserved
}
