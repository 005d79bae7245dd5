package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTarget records what process faults do.
type fakeTarget struct {
	mu     sync.Mutex
	kas    int
	agents []int64
	log    []string
	at     []time.Time
	fail   error
	slow   time.Duration
}

func (f *fakeTarget) record(format string, args ...any) error {
	if f.slow > 0 {
		time.Sleep(f.slow)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf(format, args...))
	f.at = append(f.at, time.Now())
	return f.fail
}

func (f *fakeTarget) KasCount() int                          { return f.kas }
func (f *fakeTarget) Agents() []int64                        { return f.agents }
func (f *fakeTarget) KillKas(_ context.Context, i int) error { return f.record("kill kas %d", i) }
func (f *fakeTarget) StopKas(_ context.Context, i int) error { return f.record("stop kas %d", i) }
func (f *fakeTarget) StopRedis(context.Context) error        { return f.record("stop redis") }
func (f *fakeTarget) StartRedis(context.Context) error       { return f.record("start redis") }
func (f *fakeTarget) KillAgents(_ context.Context, ids []int64) error {
	return f.record("kill agents %v", ids)
}
func (f *fakeTarget) StartAgents(_ context.Context, ids []int64) error {
	return f.record("start agents %v", ids)
}
func (f *fakeTarget) RestartAgents(_ context.Context, ids []int64) error {
	return f.record("restart agents %v", ids)
}

func (f *fakeTarget) sortedLog() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := slices.Clone(f.log)
	slices.Sort(l)
	return strings.Join(l, "; ")
}

func newProcess(t *testing.T, typ string, params Params) Process {
	t.Helper()
	p, err := NewProcess(typ, params)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProcessFaults(t *testing.T) {
	agents := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		typ        string
		params     Params
		sel        Select
		apply      string
		remove     string // "" for faults that are not reversible
		selects    Selects
		reversible bool
	}{
		{"kill-kas", nil, Select{Kas: []int{1}}, "kill kas 1", "", SelectsKas, false},
		{"kill-kas", nil, Select{Count: 2}, "kill kas 0; kill kas 1", "", SelectsKas, false},
		{"stop-kas", nil, Select{Kas: []int{2, 0}}, "stop kas 0; stop kas 2", "", SelectsKas, false},
		{"kill-agents", nil, Select{Fraction: 0.2}, "kill agents [1 2]", "start agents [1 2]", SelectsAgents, true},
		{"kill-agents", nil, Select{}, "kill agents [1 2 3 4 5 6 7 8 9 10]", "start agents [1 2 3 4 5 6 7 8 9 10]", SelectsAgents, true},
		{"restart-agents", nil, Select{Agents: []int64{7}}, "restart agents [7]", "", SelectsAgents, false},
		{"restart-agents", Params{"mode": "together"}, Select{Count: 3}, "restart agents [1 2 3]", "", SelectsAgents, false},
		{"stop-redis", nil, Select{}, "stop redis", "start redis", SelectsNothing, true},
		{"start-redis", nil, Select{}, "start redis", "", SelectsNothing, false},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			p := newProcess(t, tc.typ, tc.params)
			if p.Type() != tc.typ || p.Selects() != tc.selects || p.Reversible() != tc.reversible {
				t.Errorf("%s: type %s, selects %d, reversible %v", tc.typ, p.Type(), p.Selects(), p.Reversible())
			}
			ft := &fakeTarget{kas: 3, agents: agents}
			if err := p.Apply(t.Context(), ft, tc.sel); err != nil {
				t.Fatal(err)
			}
			if got := ft.sortedLog(); got != tc.apply {
				t.Errorf("apply: %s; want %s", got, tc.apply)
			}
			ft.log = nil
			err := p.Remove(t.Context(), ft, tc.sel)
			if tc.remove == "" {
				if !errors.Is(err, errNotReversible) {
					t.Errorf("remove of a fault that is not reversible: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ft.sortedLog(); got != tc.remove {
				t.Errorf("remove: %s; want %s", got, tc.remove)
			}
		})
	}
}

func TestProcessFaultErrors(t *testing.T) {
	ft := &fakeTarget{kas: 3, agents: []int64{1, 2}}
	for _, tc := range []struct {
		typ  string
		sel  Select
		want string
	}{
		{"kill-kas", Select{}, "kill: select the kas to act on"},
		{"kill-kas", Select{Kas: []int{5}}, "kill: no kas 5 (kas indices are 0..2)"},
		{"stop-kas", Select{Agents: []int64{1}}, "stop: kas cannot be selected by agents"},
		{"kill-agents", Select{Agents: []int64{3}}, "kill: no agent 3 (agents are 1..2)"},
		{"restart-agents", Select{Kas: []int{0}}, "restart: agents cannot be selected by kas"},
	} {
		if err := newProcess(t, tc.typ, nil).Apply(t.Context(), ft, tc.sel); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v; want %q", tc.typ, tc.sel, err, tc.want)
		}
	}
	ft.fail = errors.New("process already dead")
	err := newProcess(t, "kill-kas", nil).Apply(t.Context(), ft, Select{Kas: []int{1}})
	if err == nil || err.Error() != "kill kas 1: process already dead" {
		t.Errorf("target failure: %v", err)
	}
	err = newProcess(t, "stop-redis", nil).Remove(t.Context(), ft, Select{})
	if err == nil || err.Error() != "start redis: process already dead" {
		t.Errorf("target failure: %v", err)
	}
	// A target that does not finish in time fails with the deadline.
	ft.fail, ft.slow = nil, 200*time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err = newProcess(t, "kill-agents", nil).Apply(ctx, ft, Select{Count: 1})
	if err == nil || !strings.Contains(err.Error(), "kill agents 1: context deadline exceeded") {
		t.Errorf("slow target: %v", err)
	}
	time.Sleep(250 * time.Millisecond) // let the abandoned call end before the leak check
}

func TestRollingRestart(t *testing.T) {
	p := newProcess(t, "restart-agents", Params{"mode": "rolling", "interval": "50ms"})
	if span := p.(*RestartAgents).Span(4); span != 150*time.Millisecond {
		t.Errorf("span of 4 agents = %s", span)
	}
	ft := &fakeTarget{kas: 1, agents: []int64{1, 2, 3, 4}}
	if err := p.Apply(t.Context(), ft, Select{Count: 3}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ft.log, "; "); got != "restart agents [1]; restart agents [2]; restart agents [3]" {
		t.Errorf("rolling restart: %s", got)
	}
	for i := 1; i < len(ft.at); i++ {
		if d := ft.at[i].Sub(ft.at[i-1]); d < 50*time.Millisecond {
			t.Errorf("restart %d came %s after the previous one; want at least 50ms", i, d)
		}
	}
	ft.log = nil
	ctx, cancel := context.WithTimeout(t.Context(), 80*time.Millisecond)
	defer cancel()
	err := p.Apply(ctx, ft, Select{})
	if err == nil || !strings.Contains(err.Error(), "rolling restart: 2 of 4 agents restarted: context deadline exceeded") {
		t.Errorf("rolling restart past its deadline: %v", err)
	}
}
