package runner

import (
	"sync"
	"time"

	"github.com/tunnelbench/tunnelbench/bench/routingstats"
)

// sampler reads the kas instances once per second: routing histogram, tunnels, waiting calls.
type sampler struct {
	t  testbed
	ft *faultTimeline

	began   time.Time
	samples []sample
	stopCh  chan struct{}
	done    chan struct{}
	mu      sync.Mutex
}

type sample struct {
	routing             routingstats.Sample
	idle, busy, waiting int64
}

func newSampler(t testbed, ft *faultTimeline) *sampler {
	return &sampler{t: t, ft: ft, stopCh: make(chan struct{}), done: make(chan struct{})}
}

func (s *sampler) take() {
	st := s.t.stats()
	smp := sample{routing: routingstats.Take(s.t.gatherers()), idle: st.IdleTunnels, busy: st.BusyTunnels, waiting: st.WaitingCalls}
	s.mu.Lock()
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
}

func (s *sampler) start(at time.Time) {
	s.began = at
	s.take()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				s.take()
			case <-s.stopCh:
				s.take()
				return
			}
		}
	}()
}

func (s *sampler) stop() {
	close(s.stopCh)
	<-s.done
}

// fill writes the samples into the timeline (second i gets what happened between samples i and i+1)
// and the routing totals into the summary.
func (s *sampler) fill(tl []Second, sum *Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) > 1 {
		sum.Routing.BucketBoundsS, sum.Routing.BucketCounts, sum.Routing.Timeouts = s.samples[len(s.samples)-1].routing.Since(s.samples[0].routing)
	}
	for i := range tl {
		if i+1 < len(s.samples) {
			_, tl[i].RoutingCounts, tl[i].RoutingTimeouts = s.samples[i+1].routing.Since(s.samples[i].routing)
			tl[i].TunnelsIdle, tl[i].TunnelsBusy, tl[i].WaitingCalls = s.samples[i+1].idle, s.samples[i+1].busy, s.samples[i+1].waiting
		}
	}
	for _, at := range s.t.acceptTimes() {
		if d := at.Sub(s.began); d >= 0 {
			if i := int(d / time.Second); i < len(tl) {
				tl[i].NewConnections++
			}
		}
	}
}

// peakReconnectRate is the most agent connections accepted in any 100 ms window, per second.
func (s *sampler) peakReconnectRate() float64 {
	windows := map[int64]int{}
	peak := 0
	for _, at := range s.t.acceptTimes() {
		d := at.Sub(s.began)
		if d < 0 {
			continue // the topology's first connections are not reconnects
		}
		w := int64(d / (100 * time.Millisecond))
		windows[w]++
		peak = max(peak, windows[w])
	}
	return float64(peak) * 10
}
