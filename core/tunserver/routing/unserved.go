package routing

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/presence"
)

// A call for a method that the agent's connected tunnels do not serve fails with Unimplemented after
// the unserved grace, wherever those tunnels are:
//
//   - kas alone: the local wait gives up (presence.GetServed).
//   - several kas: each gateway judges its own tunnels and answers Unimplemented, marked with
//     rpc.GatewayUnservedTrailerKey; the routing kas fails the call once this kas (which judges its
//     own tunnels, or holds none of the agent's) and every other kas the tracker lists have said so.
//     Until the tracker answered once, or while a listed kas has not answered (it may be down, or
//     serve the method on a busy tunnel), the call waits, up to the find timeout.
//
// An agent that is connected nowhere still gets the whole find timeout: it may be on its way.

// gatewayUnservedError is a gateway kas's answer that the agent's tunnels there lack the method.
type gatewayUnservedError struct{ err error }

func (e *gatewayUnservedError) Error() string { return e.err.Error() }

// watched is what the unserved watch asks this kas's registry about the call.
func (req FindRequest) watched() presence.Call {
	return presence.Call{AgentID: req.AgentID, Service: req.Service, Method: req.Method}
}

func (f *Finder) unservedError(req FindRequest) error {
	return presence.UnservedError(req.AgentID, req.FullMethod, f.cfg.UnservedGrace)
}

// unservedEverywhere is the call's Unimplemented status once every kas that holds the agent's tunnels
// said that they lack the method, nil while one may still serve it.
func (s *search) unservedEverywhere() error {
	if !s.haveList || s.f.cfg.UnservedGrace <= 0 {
		return nil
	}
	local := s.localUnserved
	if !local && s.f.cfg.Registry.Presence(s.req.AgentID, s.req.Service, s.req.Method) != presence.AgentAbsent {
		return nil // this kas serves it, or has not judged yet
	}
	remote := 0
	var last error
	for _, u := range s.listed {
		if u == s.f.cfg.SelfURL {
			continue
		}
		if last = s.unserved[u]; last == nil {
			return nil
		}
		remote++
	}
	switch {
	case remote == 0 && !local:
		return nil // connected nowhere: the find timeout
	case remote == 0:
		return s.f.unservedError(s.req)
	case remote == 1 && !local:
		return last // the gateway's own words
	}
	kas := remote
	if local {
		kas++
	}
	return status.Errorf(codes.Unimplemented,
		"agent %d is connected to %d kas but does not serve %s: none of its tunnels there announced it within the grace (--unserved-grace)",
		s.req.AgentID, kas, s.req.FullMethod)
}
