package chaos

import (
	"context"
	"fmt"
)

// LimitData closes a connection once Bytes have passed in a direction it applies to (counted per
// connection and per direction, from when the fault reached the connection). Params: bytes
// (required: 64, 16KiB, 1MiB), direction.
type LimitData struct {
	Bytes     int64
	Direction Direction
	t         toxic
}

func init() { RegisterFault("limit-data", newLimitData) }

func newLimitData(p Params) (Fault, error) {
	r := readParams(p)
	f := &LimitData{Bytes: r.bytes("bytes"), Direction: r.direction()}
	if err := r.done(); err != nil {
		return nil, err
	}
	f.t = newToxic("limit_data", f.Direction, struct {
		Bytes int64 `json:"bytes"`
	}{f.Bytes})
	return f, nil
}

func (f *LimitData) Type() string                               { return "limit-data" }
func (f *LimitData) Apply(ctx context.Context, p *Proxy) error  { return f.t.apply(ctx, p) }
func (f *LimitData) Remove(ctx context.Context, p *Proxy) error { return f.t.remove(ctx, p) }
func (f *LimitData) String() string {
	return fmt.Sprintf("limit-data %d bytes %s", f.Bytes, f.Direction)
}
