package presence

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// These tests run in synctest bubbles: time is fake, so "after a grace" is exact, not a guess.

const grace = time.Second

// fakeSource answers every question with what the test set last, and counts the questions.
type fakeSource struct {
	now  atomic.Int32
	asks atomic.Int32
}

func (s *fakeSource) Presence(int64, string, string) Presence {
	s.asks.Add(1)
	return Presence(s.now.Load())
}

func (s *fakeSource) set(p Presence) { s.now.Store(int32(p)) }

var testCall = Call{AgentID: 1, Service: "test.Svc", Method: "M"}

func TestWatchUnservedVerdicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{}
		src.set(MethodUnserved)
		ctx, cancel := context.WithCancel(t.Context())
		verdicts := make(chan bool, 10)
		type verdictAt struct {
			unserved bool
			after    time.Duration
		}
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			WatchUnserved(ctx, src, testCall, grace, func(u bool) { verdicts <- u })
		}()
		next := func() verdictAt {
			t.Helper()
			select {
			case u := <-verdicts:
				return verdictAt{u, time.Since(start)}
			case <-time.After(time.Minute):
				t.Fatal("no verdict within a minute (fake time)")
				return verdictAt{}
			}
		}
		// Unserved at 0 and at 1 s: judged at the second check.
		if v := next(); v != (verdictAt{true, grace}) {
			t.Fatalf("first verdict %+v, want unserved after the grace", v)
		}
		time.Sleep(grace / 2)
		src.set(MethodServed) // a tunnel with the method arrived: the next check lifts the verdict
		if v := next(); v != (verdictAt{false, 2 * grace}) {
			t.Fatalf("second verdict %+v, want served at the next check", v)
		}
		time.Sleep(grace / 2)
		src.set(MethodUnserved) // it left again: two checks in a row before the verdict
		if v := next(); v != (verdictAt{true, 4 * grace}) {
			t.Fatalf("third verdict %+v, want unserved two checks later", v)
		}
		cancel()
		<-done
		if len(verdicts) != 0 {
			t.Fatalf("verdicts repeated: %d more", len(verdicts))
		}
	})
}

// An absent agent is never judged: it may be on its way, and gets the whole find timeout.
func TestWatchUnservedNeverJudgesAnAbsentAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{}
		ctx, cancel := context.WithTimeout(t.Context(), 30*grace+grace/2)
		defer cancel()
		WatchUnserved(ctx, src, testCall, grace, func(bool) { t.Fatal("an absent agent was judged") })
		if n := src.asks.Load(); n != 31 {
			t.Fatalf("%d checks in 30.5 graces, want 31 (one at the start, one per grace until the end)", n)
		}
	})
}

// fakeHandle is a call's wait for a tunnel: Get returns what arrives on tunnel, or ctx's error.
type fakeHandle struct{ tunnel chan string }

func (h fakeHandle) Get(ctx context.Context) (string, error) {
	select {
	case s := <-h.tunnel:
		return s, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

var errTestUnserved = errors.New("unserved (test)")

func TestGetServed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		presence Presence
		grace    time.Duration
		arrives  time.Duration // when a tunnel arrives; 0: never
		want     string
		wantErr  error
		wantAt   time.Duration
	}{
		{name: "unserved fails after the grace", presence: MethodUnserved, grace: grace, wantErr: errTestUnserved, wantAt: grace},
		{name: "a tunnel within the grace wins", presence: MethodUnserved, grace: grace, arrives: grace / 2, want: "tunnel", wantAt: grace / 2},
		{name: "absent waits the whole find", presence: AgentAbsent, grace: grace, wantErr: context.DeadlineExceeded, wantAt: 30 * grace},
		{name: "no grace waits the whole find", presence: MethodUnserved, wantErr: context.DeadlineExceeded, wantAt: 30 * grace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &fakeSource{}
				src.set(tc.presence)
				h := fakeHandle{tunnel: make(chan string, 1)}
				if tc.arrives > 0 {
					time.AfterFunc(tc.arrives, func() { h.tunnel <- "tunnel" })
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*grace) // the find timeout
				defer cancel()
				start := time.Now()
				got, err := GetServed(ctx, h, src, testCall, tc.grace, errTestUnserved)
				if got != tc.want || !errors.Is(err, tc.wantErr) || time.Since(start) != tc.wantAt {
					t.Fatalf("got %q, %v after %s; want %q, %v after %s", got, err, time.Since(start), tc.want, tc.wantErr, tc.wantAt)
				}
			})
		})
	}
}

func TestPresenceString(t *testing.T) {
	for p, want := range map[Presence]string{AgentAbsent: "absent", MethodServed: "served", MethodUnserved: "unserved", 7: "Presence(?)"} {
		if got := p.String(); got != want {
			t.Errorf("%d: %q, want %q", int(p), got, want)
		}
	}
}
