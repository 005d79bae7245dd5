package chaos

import (
	"context"
	"fmt"
	"time"
)

// Latency delays every chunk of bytes by Latency ± Jitter (uniform), in each direction it applies
// to: with direction both, a request and its answer are each delayed, so a round trip grows by about
// twice Latency. Chunks keep their order. Params: latency (required), jitter (default 0, at most
// latency), direction.
type Latency struct {
	Latency, Jitter time.Duration
	Direction       Direction
	t               toxic
}

func init() { RegisterFault("latency", newLatency) }

func newLatency(p Params) (Fault, error) {
	r := readParams(p)
	f := &Latency{
		Latency:   r.positiveDuration("latency", -1),
		Jitter:    r.duration("jitter", 0),
		Direction: r.direction(),
	}
	if f.Jitter > f.Latency && f.Latency > 0 {
		r.errs = append(r.errs, &ParamError{Key: "jitter", Err: fmt.Errorf("%s is more than the latency %s", f.Jitter, f.Latency)})
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	f.t = newToxic("latency", f.Direction, struct {
		Latency int64 `json:"latency"`
		Jitter  int64 `json:"jitter"`
	}{f.Latency.Milliseconds(), f.Jitter.Milliseconds()})
	return f, nil
}

func (f *Latency) Type() string                               { return "latency" }
func (f *Latency) Apply(ctx context.Context, p *Proxy) error  { return f.t.apply(ctx, p) }
func (f *Latency) Remove(ctx context.Context, p *Proxy) error { return f.t.remove(ctx, p) }
func (f *Latency) String() string {
	return fmt.Sprintf("latency %s ± %s %s", f.Latency, f.Jitter, f.Direction)
}
