package directory

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tracker"
)

const selfURL = "grpc://self:1"

func newTestDirectory(t *testing.T, tr tracker.Tracker) *Directory {
	t.Helper()
	d, err := New(Config{Tracker: tr, UnregisterDelay: 50 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func listed(tr tracker.Tracker, agentID int64) []string {
	urls, _ := tr.KasURLs(context.Background(), agentID)
	return urls
}

// An agent's first tunnel registers this kas for it; its last one going unregisters it after the delay;
// Stop unregisters what is left.
func TestDirectoryPublishesThisKasAgents(t *testing.T) {
	tr := tracker.NewMemory(0)
	d := newTestDirectory(t, tr)
	d.Start(selfURL)
	d.OnAgent(1, true)
	d.OnAgent(2, true)
	waitFor(t, "agents 1 and 2 registered", func() bool {
		return slices.Contains(listed(tr, 1), selfURL) && slices.Contains(listed(tr, 2), selfURL)
	})
	d.OnAgent(1, false)
	waitFor(t, "agent 1 unregistered after its last tunnel went", func() bool { return len(listed(tr, 1)) == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.Stop(ctx)
	if urls := listed(tr, 2); len(urls) != 0 {
		t.Fatalf("agent 2 still listed after Stop: %v", urls)
	}
}

// Kill leaves the records, as a crash would.
func TestDirectoryKillLeavesRecords(t *testing.T) {
	tr := tracker.NewMemory(0)
	d := newTestDirectory(t, tr)
	d.Start(selfURL)
	d.OnAgent(7, true)
	waitFor(t, "agent 7 registered", func() bool { return len(listed(tr, 7)) == 1 })
	d.Kill()
	if urls := listed(tr, 7); len(urls) != 1 {
		t.Fatalf("records after Kill: %v", urls)
	}
}

// Watch sends the kas that hold an agent, and again when that changes.
func TestDirectoryWatchFollowsTheTracker(t *testing.T) {
	tr := tracker.NewMemory(0)
	d := newTestDirectory(t, tr)
	defer d.Close()
	urls, stop := d.Watch(3)
	defer stop()
	_ = tr.Register(context.Background(), "grpc://other:2", 3)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-urls:
			if slices.Contains(got, "grpc://other:2") {
				return
			}
		case <-deadline:
			t.Fatal("the watch never listed the kas that registered agent 3")
		}
	}
}
