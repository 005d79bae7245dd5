package chaos

import (
	"errors"
	"fmt"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// ProxyListen is where every proxy listens: loopback, on a port the system picks.
const ProxyListen = "127.0.0.1:0"

// LeakyFunctions are the toxiproxy functions whose goroutines can stay blocked after a toxic closed
// a connection while more bytes were queued in front of it (see the package doc). Pass them to
// goleak.IgnoreTopFunction in tests that use reset-peer or limit-data on busy connections.
var LeakyFunctions = []string{
	"github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe",
	"github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write",
}

func init() {
	// Toxiproxy logs through zerolog; the bandwidth toxic uses zerolog's global logger, which writes
	// every level to stderr. Only toxiproxy uses zerolog in this module: silence it. Done in init,
	// before any toxic can read the global.
	zlog.Logger = zerolog.Nop()
}

// Proxies is every proxy of a topology, keyed by link and instance name.
type Proxies struct {
	mu      sync.Mutex
	server  *toxiproxy.ApiServer
	proxies []*Proxy
	byKey   map[proxyKey]*Proxy
	closed  bool
}

type proxyKey struct {
	link Link
	name string
}

// Proxy is one loopback proxy: one instance of a link.
type Proxy struct {
	link     Link
	name     string
	listen   string
	upstream string
	p        *toxiproxy.Proxy
}

// NewProxies returns an empty set of proxies. Close it to stop them all.
func NewProxies() *Proxies {
	return &Proxies{
		// No API listener: the server only carries the (disabled) logger and metrics for the proxies.
		server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		byKey:  make(map[proxyKey]*Proxy),
	}
}

// Add starts a proxy for instance name of link that listens on loopback and forwards every
// connection to upstream. It returns the address clients of the link must dial instead of upstream.
// Names follow AgentName and KasName so that selections find them (see Select).
func (ps *Proxies) Add(link Link, name, upstream string) (listenAddr string, err error) {
	if _, err := ParseLink(string(link)); err != nil {
		return "", fmt.Errorf("add proxy %q: %w", name, err)
	}
	if name == "" || upstream == "" {
		return "", fmt.Errorf("add proxy on %s: a name and an upstream are required (got %q, %q)", link, name, upstream)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return "", fmt.Errorf("add proxy %s/%s: proxies are closed", link, name)
	}
	key := proxyKey{link, name}
	if _, ok := ps.byKey[key]; ok {
		return "", fmt.Errorf("add proxy %s/%s: already exists", link, name)
	}
	tp := toxiproxy.NewProxy(ps.server, string(link)+"/"+name, ProxyListen, upstream)
	if err := tp.Start(); err != nil {
		return "", fmt.Errorf("add proxy %s/%s: %w", link, name, err)
	}
	// Start has set Listen to the bound address (a happens-before through its started channel); keep
	// a copy, since link-up writes the field again.
	p := &Proxy{link: link, name: name, listen: tp.Listen, upstream: upstream, p: tp}
	ps.proxies = append(ps.proxies, p)
	ps.byKey[key] = p
	return p.listen, nil
}

// Get returns the proxy of instance name on link, or nil.
func (ps *Proxies) Get(link Link, name string) *Proxy {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.byKey[proxyKey{link, name}]
}

// Instances returns the proxies of link in the order they were added.
func (ps *Proxies) Instances(link Link) []*Proxy {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []*Proxy
	for _, p := range ps.proxies {
		if p.link == link {
			out = append(out, p)
		}
	}
	return out
}

// Select returns the proxies of link that sel picks (see Select). It fails when sel picks none.
func (ps *Proxies) Select(link Link, sel Select) ([]*Proxy, error) {
	out, err := sel.proxies(ps.Instances(link))
	if err != nil {
		return nil, fmt.Errorf("select %s proxies (%s): %w", link, sel, err)
	}
	return out, nil
}

// Close stops every proxy and closes every connection through them. It is safe to call twice.
func (ps *Proxies) Close() {
	ps.mu.Lock()
	ps.closed = true
	proxies := ps.proxies
	ps.proxies, ps.byKey = nil, map[proxyKey]*Proxy{}
	ps.mu.Unlock()
	for _, p := range proxies {
		p.p.Stop()
	}
}

// Link is the link this proxy is an instance of.
func (p *Proxy) Link() Link { return p.link }

// Name is the instance name.
func (p *Proxy) Name() string { return p.name }

// Listen is the address clients dial.
func (p *Proxy) Listen() string { return p.listen }

// Upstream is the address the proxy dials.
func (p *Proxy) Upstream() string { return p.upstream }

// String is "link/name".
func (p *Proxy) String() string { return string(p.link) + "/" + p.name }

// disable closes the listener and every connection through the proxy.
func (p *Proxy) disable() error {
	p.p.Lock()
	enabled := p.p.Enabled
	p.p.Unlock()
	if !enabled {
		return errors.New("the link is already down")
	}
	p.p.Stop()
	return nil
}

// enable listens again on the same address.
func (p *Proxy) enable() error {
	err := p.p.Start()
	if errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
		return errors.New("the link is not down")
	}
	if err != nil {
		return fmt.Errorf("listen again on %s: %w", p.listen, err)
	}
	return nil
}
