package registry

import "github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"

// Presence reports whether the agent's tunnels on this kas serve the method. Busy tunnels count: a call
// that waits for one of them is served once it is idle again.
func (r *Registry) Presence(agentID int64, service, method string) presence.Presence {
	s := r.stripe(agentID)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.agents[agentID]
	if e == nil || e.tunnels == 0 {
		return presence.AgentAbsent
	}
	if e.descs.Supports(service, method) {
		return presence.MethodServed
	}
	return presence.MethodUnserved
}
