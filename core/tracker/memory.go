package tracker

import (
	"context"
	"sync"
	"time"
)

// Memory is the in-process tracker: kas instances that run in one process (the harness) share one.
// Records expire after TTL like Redis ones, so that tests of expiry behave the same.
type Memory struct {
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu     sync.Mutex
	agents map[int64]map[string]time.Time // agent id -> kas URL -> expiry
}

var _ Tracker = (*Memory)(nil)

// NewMemory returns an empty tracker with records that live ttl (DefaultTTL when zero).
func NewMemory(ttl time.Duration) *Memory {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Memory{TTL: ttl, agents: map[int64]map[string]time.Time{}}
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Register implements Tracker.
func (m *Memory) Register(_ context.Context, kasURL string, agentID int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	urls := m.agents[agentID]
	if urls == nil {
		urls = map[string]time.Time{}
		m.agents[agentID] = urls
	}
	urls[kasURL] = m.now().Add(m.TTL)
	return nil
}

// Unregister implements Tracker.
func (m *Memory) Unregister(_ context.Context, kasURL string, agentID int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if urls := m.agents[agentID]; urls != nil {
		delete(urls, kasURL)
		if len(urls) == 0 {
			delete(m.agents, agentID)
		}
	}
	return nil
}

// Refresh implements Tracker.
func (m *Memory) Refresh(_ context.Context, kasURL string, agentIDs []int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	exp := m.now().Add(m.TTL)
	for _, id := range agentIDs {
		urls := m.agents[id]
		if urls == nil {
			urls = map[string]time.Time{}
			m.agents[id] = urls
		}
		urls[kasURL] = exp // a record that expired meanwhile comes back
	}
	return nil
}

// KasURLs implements Tracker.
func (m *Memory) KasURLs(_ context.Context, agentID int64) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var out []string
	for u, exp := range m.agents[agentID] {
		if exp.After(now) {
			out = append(out, u)
		} else {
			delete(m.agents[agentID], u)
		}
	}
	if len(m.agents[agentID]) == 0 {
		delete(m.agents, agentID)
	}
	return out, nil
}
