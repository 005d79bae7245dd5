package presence

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

// Source is what knows an agent's presence on this kas: the registry.
type Source interface {
	Presence(agentID int64, service, method string) Presence
}

// Call is what a waiting call asks a Source about: its agent and method.
type Call struct {
	AgentID         int64
	Service, Method string
}

func (c Call) unserved(src Source) bool {
	return src.Presence(c.AgentID, c.Service, c.Method) == MethodUnserved
}
