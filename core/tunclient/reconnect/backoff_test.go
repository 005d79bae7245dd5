package reconnect

import (
	"strings"
	"testing"
	"time"
)

func TestBackoffGrowsWithJitterUpToMax(t *testing.T) {
	b := NewState(DefaultBackoff)
	want := []time.Duration{time.Second, 1600 * time.Millisecond, 2560 * time.Millisecond}
	for i, w := range want {
		d := b.Wait()
		if lo, hi := time.Duration(float64(w)*0.8), time.Duration(float64(w)*1.2); d < lo || d > hi {
			t.Fatalf("wait %d = %v, want within [%v, %v]", i, d, lo, hi)
		}
	}
	for range 20 {
		if d := b.Wait(); d > 6*time.Second {
			t.Fatalf("wait %v above max+jitter", d)
		}
	}
	b.Reset()
	if d := b.Wait(); d > 1200*time.Millisecond {
		t.Fatalf("after reset: %v", d)
	}
}

// After a long outage (a minute of failed reconnects) the next wait is still at most the cap and its
// jitter: the agent is back within seconds of kas, not the 18.6 s a 20 s cap gave.
func TestBackoffAfterLongOutageIsCapped(t *testing.T) {
	b := NewState(DefaultBackoff)
	limit := time.Duration(float64(DefaultBackoff.Max) * (1 + DefaultBackoff.Jitter))
	var outage time.Duration
	for outage < time.Hour {
		d := b.Wait()
		if d > limit {
			t.Fatalf("wait %v after %v of outage, above the cap of %v (+%g jitter)", d, outage, DefaultBackoff.Max, DefaultBackoff.Jitter)
		}
		outage += d
	}
	if DefaultBackoff.Max > 5*time.Second {
		t.Fatalf("agent backoff cap %v: want at most 5s", DefaultBackoff.Max)
	}
}

func TestJitterNeverPanics(t *testing.T) {
	for _, j := range []float64{0, -1, 1e-12} {
		if d := jittered(time.Second, j); d < 0 {
			t.Fatalf("jitter %v: %v", j, d)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, 1} {
		if got := UpTo(d); got < 0 || (d > 0 && got >= d) {
			t.Fatalf("UpTo(%v) = %v", d, got)
		}
	}
	if d := jittered(0, 0.2); d != 0 {
		t.Fatalf("jittered(0) = %v", d)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	if err := DefaultBackoff.Validate(); err != nil {
		t.Fatalf("the default backoff is refused: %v", err)
	}
	err := Backoff{Initial: 0, Max: 1, Factor: 0.5, Jitter: 2}.Validate()
	if err == nil {
		t.Fatal("bad backoff accepted")
	}
	for _, want := range []string{"backoff needs", "backoff factor", "backoff jitter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
