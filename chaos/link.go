package chaos

import (
	"fmt"
	"strings"
)

// Link is a kind of network path in a topology. Each link has one or more proxy instances.
type Link string

// Links of a topology. The client of each link dials the proxy; the proxy dials the server.
const (
	// LinkCallerKas: callers to a kas public API; one instance per kas, named KasName(i).
	LinkCallerKas Link = "caller->kas"
	// LinkAgentKas: agents to a kas agent API; one instance per agent, named AgentName(id), or one
	// per (agent, kas) pair, named AgentName(id)+"/"+KasName(i).
	LinkAgentKas Link = "agent->kas"
	// LinkKasKas: kas to another kas's private API; one instance per destination kas, named
	// KasName(i) (every kas reaches kas i through it), or KasName(from)+"/"+KasName(to).
	LinkKasKas Link = "kas->kas"
	// LinkKasRedis: a kas to Redis; one instance per kas, named KasName(i).
	LinkKasRedis Link = "kas->redis"
)

// Links lists every link, in a stable order.
var Links = []Link{LinkCallerKas, LinkAgentKas, LinkKasKas, LinkKasRedis}

// ParseLink parses "caller->kas", "agent->kas", "kas->kas" or "kas->redis".
func ParseLink(s string) (Link, error) {
	for _, l := range Links {
		if string(l) == s {
			return l, nil
		}
	}
	return "", fmt.Errorf("unknown link %q (want %s)", s, joinQuoted(Links))
}

// Direction is which way through a proxy a fault acts.
type Direction string

// Directions.
const (
	// Upstream: bytes from the link's client (caller, agent, kas) to its server (kas, Redis).
	Upstream Direction = "upstream"
	// Downstream: bytes from the link's server back to its client.
	Downstream Direction = "downstream"
	// Both directions: one toxic each way.
	Both Direction = "both"
)

// DefaultDirection is the direction of every fault that takes one, unless its params say otherwise.
const DefaultDirection = Both

// ParseDirection parses "upstream", "downstream" or "both".
func ParseDirection(s string) (Direction, error) {
	switch d := Direction(s); d {
	case Upstream, Downstream, Both:
		return d, nil
	}
	return "", fmt.Errorf("unknown direction %q (want upstream, downstream or both)", s)
}

// streams is the toxiproxy stream names of d.
func (d Direction) streams() []string {
	switch d {
	case Upstream:
		return []string{"upstream"}
	case Downstream:
		return []string{"downstream"}
	default:
		return []string{"upstream", "downstream"}
	}
}

// AgentName names the proxy instance of agent id on the agent->kas link.
func AgentName(id int64) string { return fmt.Sprintf("agent-%d", id) }

// KasName names the proxy instance of kas i (0-based) on a kas-side link.
func KasName(i int) string { return fmt.Sprintf("kas-%d", i) }

func joinQuoted[T ~string](xs []T) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
