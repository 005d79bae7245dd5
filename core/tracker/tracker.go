// Package tracker is the directory of which kas instances hold tunnels for which agent: kas registers an
// agent when it gets the agent's first idle tunnel and unregisters it when the last one is gone, and a
// routing kas lists the gateways to ask for an agent.
//
// A tracker is advisory: a listed kas may have lost its tunnels since, and the routing kas copes. It must
// never block tunnel or call handling on a slow backend.
package tracker

import (
	"context"
	"time"
)

// Tracker records which kas holds tunnels for which agent. kasURL is a kas's private API URL, for
// example "grpc://10.0.0.5:8155". Implementations are safe for concurrent use.
type Tracker interface {
	// Register records that kasURL holds tunnels for agentID, valid until the next Refresh or the TTL.
	Register(ctx context.Context, kasURL string, agentID int64) error
	// Unregister removes the record of kasURL for agentID.
	Unregister(ctx context.Context, kasURL string, agentID int64) error
	// Refresh extends (or re-creates) the records of kasURL for every agent in agentIDs.
	Refresh(ctx context.Context, kasURL string, agentIDs []int64) error
	// KasURLs lists the kas instances that hold tunnels for agentID, in no particular order, without
	// expired records.
	KasURLs(ctx context.Context, agentID int64) ([]string, error)
}

// Defaults for trackers with expiring records.
const (
	// DefaultTTL is how long a record lives without a refresh: a kas that dies without unregistering
	// disappears from the directory after this.
	DefaultTTL = 5 * time.Minute
	// DefaultRefreshPeriod is how often a kas refreshes its records; it must be below the TTL.
	DefaultRefreshPeriod = 4 * time.Minute
)
