package chaos

import "context"

// LinkDown takes the link down: the proxy stops listening (new connections are refused at once)
// and closes every connection through it. Removing it brings the link up: the proxy listens again
// on the same address, which fails if another socket took the port meanwhile. No params.
type LinkDown struct{}

func init() { RegisterFault("link-down", newLinkDown) }

func newLinkDown(p Params) (Fault, error) {
	if err := readParams(p).done(); err != nil {
		return nil, err
	}
	return &LinkDown{}, nil
}

func (f *LinkDown) Type() string                             { return "link-down" }
func (f *LinkDown) Apply(_ context.Context, p *Proxy) error  { return p.disable() }
func (f *LinkDown) Remove(_ context.Context, p *Proxy) error { return p.enable() }
func (f *LinkDown) String() string                           { return "link-down" }
