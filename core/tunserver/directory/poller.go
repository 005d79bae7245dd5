package directory

import (
	"context"
	"sync"
	"time"

	"github.com/tunnelbench/tunnelbench/core/tracker"
)

// trackerOpTimeout bounds one tracker question: a slow tracker must not hold calls longer than their
// own find timeout anyway, and a stuck one must not pile up polls.
const trackerOpTimeout = 2 * time.Second

// poller asks the tracker which kas instances hold an agent's tunnels, once per poll interval per agent,
// however many calls wait for that agent.
type poller struct {
	tr       tracker.Tracker
	interval time.Duration
	onErr    func(error)

	mu     sync.Mutex
	agents map[int64]*agentPoll
	closed bool
	wg     sync.WaitGroup
}

type agentPoll struct {
	subs   map[chan []string]struct{}
	last   []string
	cancel context.CancelFunc
}

func newPoller(tr tracker.Tracker, interval time.Duration, onErr func(error)) *poller {
	return &poller{tr: tr, interval: interval, onErr: onErr, agents: map[int64]*agentPoll{}}
}

// subscribe returns a channel that receives the agent's kas URLs, the newest list replacing an unread
// one, until unsubscribe is called.
func (p *poller) subscribe(agentID int64) (<-chan []string, func()) {
	ch := make(chan []string, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ch, func() {}
	}
	ap := p.agents[agentID]
	if ap == nil {
		ctx, cancel := context.WithCancel(context.Background())
		ap = &agentPoll{subs: map[chan []string]struct{}{}, cancel: cancel}
		p.agents[agentID] = ap
		p.wg.Add(1)
		go p.run(ctx, agentID, ap)
	} else if ap.last != nil {
		ch <- ap.last
	}
	ap.subs[ch] = struct{}{}
	return ch, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(ap.subs, ch)
		if len(ap.subs) == 0 && p.agents[agentID] == ap {
			delete(p.agents, agentID)
			ap.cancel()
		}
	}
}

func (p *poller) run(ctx context.Context, agentID int64, ap *agentPoll) {
	defer p.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		octx, cancel := context.WithTimeout(ctx, trackerOpTimeout)
		urls, err := p.tr.KasURLs(octx, agentID)
		cancel()
		if err != nil {
			if ctx.Err() == nil && p.onErr != nil {
				p.onErr(err)
			}
		} else {
			p.publish(ap, urls)
		}
		t.Reset(p.interval)
	}
}

func (p *poller) publish(ap *agentPoll, urls []string) {
	if urls == nil {
		urls = []string{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ap.last = urls
	for ch := range ap.subs {
		select {
		case <-ch: // drop the unread, older list
		default:
		}
		ch <- urls
	}
}

// close stops every poll and waits for them.
func (p *poller) close() {
	p.mu.Lock()
	p.closed = true
	for id, ap := range p.agents {
		ap.cancel()
		delete(p.agents, id)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
