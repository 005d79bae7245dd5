package chaos

import (
	"context"
	"fmt"
	"time"
)

// Blackhole drops every byte silently, on connections that exist and on new ones (which the proxy
// still accepts). Peers notice only through their own timeouts and keepalives. With CloseAfter > 0
// a connection is closed that long after the black hole reached it. Removing the fault closes the
// connections it held (toxiproxy's timeout toxic closes them on cleanup). Params: close_after
// (default 0: hold forever), direction.
type Blackhole struct {
	CloseAfter time.Duration
	Direction  Direction
	t          toxic
}

func init() { RegisterFault("blackhole", newBlackhole) }

func newBlackhole(p Params) (Fault, error) {
	r := readParams(p)
	f := &Blackhole{CloseAfter: r.duration("close_after", 0), Direction: r.direction()}
	if err := r.done(); err != nil {
		return nil, err
	}
	f.t = newToxic("timeout", f.Direction, struct {
		Timeout int64 `json:"timeout"`
	}{f.CloseAfter.Milliseconds()})
	return f, nil
}

func (f *Blackhole) Type() string                               { return "blackhole" }
func (f *Blackhole) Apply(ctx context.Context, p *Proxy) error  { return f.t.apply(ctx, p) }
func (f *Blackhole) Remove(ctx context.Context, p *Proxy) error { return f.t.remove(ctx, p) }
func (f *Blackhole) String() string {
	return fmt.Sprintf("blackhole close_after %s %s", f.CloseAfter, f.Direction)
}
