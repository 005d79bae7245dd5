package chaos

import (
	"context"
	"fmt"
	"time"
)

// SlowClose delays the close of a connection: when one side closes, the other side sees it Delay
// later (in each direction the fault applies to). Params: delay (required), direction.
type SlowClose struct {
	Delay     time.Duration
	Direction Direction
	t         toxic
}

func init() { RegisterFault("slow-close", newSlowClose) }

func newSlowClose(p Params) (Fault, error) {
	r := readParams(p)
	f := &SlowClose{Delay: r.positiveDuration("delay", -1), Direction: r.direction()}
	if err := r.done(); err != nil {
		return nil, err
	}
	f.t = newToxic("slow_close", f.Direction, struct {
		Delay int64 `json:"delay"`
	}{f.Delay.Milliseconds()})
	return f, nil
}

func (f *SlowClose) Type() string                               { return "slow-close" }
func (f *SlowClose) Apply(ctx context.Context, p *Proxy) error  { return f.t.apply(ctx, p) }
func (f *SlowClose) Remove(ctx context.Context, p *Proxy) error { return f.t.remove(ctx, p) }
func (f *SlowClose) String() string                             { return fmt.Sprintf("slow-close %s %s", f.Delay, f.Direction) }
