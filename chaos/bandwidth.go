package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Bandwidth limits each connection to Rate kilobytes (1000 bytes) per second in each direction it
// applies to. Params: rate (required: "500KB/s" or "2MB/s"), direction.
type Bandwidth struct {
	// Rate in KB/s (toxiproxy's unit).
	Rate      int64
	Direction Direction
	t         toxic
}

func init() { RegisterFault("bandwidth", newBandwidth) }

func newBandwidth(p Params) (Fault, error) {
	r := readParams(p)
	f := &Bandwidth{Direction: r.direction()}
	if v, ok := r.value("rate"); !ok {
		r.fail("rate", "required (e.g. 500KB/s or 2MB/s)")
	} else if f.Rate, ok = parseRate(v); !ok {
		r.fail("rate", "bad rate %q (want a whole number of KB/s or MB/s above zero, e.g. 500KB/s)", v)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	f.t = newToxic("bandwidth", f.Direction, struct {
		Rate int64 `json:"rate"`
	}{f.Rate})
	return f, nil
}

// parseRate parses "500KB/s" or "2MB/s" into KB/s.
func parseRate(s string) (int64, bool) {
	mult := int64(0)
	for _, u := range []struct {
		s string
		m int64
	}{{"KB/s", 1}, {"MB/s", 1000}} {
		if n, ok := strings.CutSuffix(s, u.s); ok {
			s, mult = strings.TrimSpace(n), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if mult == 0 || err != nil || n <= 0 || n > 1<<40/mult {
		return 0, false
	}
	return n * mult, true
}

func (f *Bandwidth) Type() string                               { return "bandwidth" }
func (f *Bandwidth) Apply(ctx context.Context, p *Proxy) error  { return f.t.apply(ctx, p) }
func (f *Bandwidth) Remove(ctx context.Context, p *Proxy) error { return f.t.remove(ctx, p) }
func (f *Bandwidth) String() string                             { return fmt.Sprintf("bandwidth %dKB/s %s", f.Rate, f.Direction) }
