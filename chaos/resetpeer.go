package chaos

import (
	"context"
	"fmt"
	"time"
)

// ResetPeer closes a connection Timeout after the next bytes arrive in a direction it applies to,
// dropping those bytes. Connections accepted while it is in place are reset (TCP RST: a gRPC call
// fails with Unavailable, "connection reset by peer"); connections that existed before it was added
// get an ordinary close (FIN) instead, and idle connections are untouched until they carry data.
// Params: timeout (default 0: at once), direction.
type ResetPeer struct {
	Timeout   time.Duration
	Direction Direction
	t         toxic
}

func init() { RegisterFault("reset-peer", newResetPeer) }

func newResetPeer(p Params) (Fault, error) {
	r := readParams(p)
	f := &ResetPeer{Timeout: r.duration("timeout", 0), Direction: r.direction()}
	if err := r.done(); err != nil {
		return nil, err
	}
	f.t = newToxic("reset_peer", f.Direction, struct {
		Timeout int64 `json:"timeout"`
	}{f.Timeout.Milliseconds()})
	return f, nil
}

func (f *ResetPeer) Type() string                               { return "reset-peer" }
func (f *ResetPeer) Apply(ctx context.Context, p *Proxy) error  { return f.t.apply(ctx, p) }
func (f *ResetPeer) Remove(ctx context.Context, p *Proxy) error { return f.t.remove(ctx, p) }
func (f *ResetPeer) String() string {
	return fmt.Sprintf("reset-peer after %s %s", f.Timeout, f.Direction)
}
