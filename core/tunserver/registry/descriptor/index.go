package descriptor

import (
	"fmt"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// Bounds on a descriptor, so that one agent cannot make kas hold an arbitrary amount of memory per tunnel.
const (
	MaxServices = 1000
	MaxMethods  = 10000
	// DefaultMaxBytes bounds the encoded first message, whatever the message size limit is.
	DefaultMaxBytes = 1 << 20
)

// Index answers "does this tunnel serve that method" in constant time.
type Index struct {
	// services maps a service name to its methods, each to whether its caller sends one request
	// message; a nil set means every method.
	services map[string]map[string]bool
	// Reuse: the agent asked for a reusable tunnel.
	Reuse bool
	// Batches: the agent takes and sends batches on a reusable tunnel (rpc.RequestBatch).
	Batches bool
	// EndsOnRequest: the agent ends a reusable tunnel when kas sends rpc.EndTunnel.
	EndsOnRequest bool
}

// NewIndex indexes the services of a descriptor, checking its bounds.
func NewIndex(d *rpc.AgentDescriptor) (Index, error) {
	if len(d.GetServices()) > MaxServices {
		return Index{}, fmt.Errorf("descriptor lists %d services, the limit is %d", len(d.GetServices()), MaxServices)
	}
	idx := Index{services: make(map[string]map[string]bool, len(d.GetServices()))}
	methods := 0
	for _, s := range d.GetServices() {
		if s.GetName() == "" {
			return Index{}, fmt.Errorf("descriptor has a service without a name")
		}
		if s.GetAllMethods() {
			idx.services[s.GetName()] = nil
			continue
		}
		set, ok := idx.services[s.GetName()]
		if ok && set == nil {
			continue // already "all methods"
		}
		if set == nil {
			set = make(map[string]bool, len(s.GetMethods()))
			idx.services[s.GetName()] = set
		}
		for _, m := range s.GetMethods() {
			if m.GetName() == "" {
				return Index{}, fmt.Errorf("descriptor service %s has a method without a name", s.GetName())
			}
			// Listed twice, a method takes one request only if both say so.
			prev, seen := set[m.GetName()]
			set[m.GetName()] = m.GetOneRequest() && (prev || !seen)
		}
		methods += len(s.GetMethods())
		if methods > MaxMethods {
			return Index{}, fmt.Errorf("descriptor lists more than %d methods", MaxMethods)
		}
	}
	return idx, nil
}

// OneRequest reports whether the agent said that the method's caller sends one request message
// (rpc.Method.one_request). False for a service served with all its methods: nothing is known of them.
func (d Index) OneRequest(service, method string) bool {
	return d.services[service][method]
}

// Supports reports whether a tunnel with this descriptor serves the method.
func (d Index) Supports(service, method string) bool {
	set, ok := d.services[service]
	if !ok {
		return false
	}
	if set == nil {
		return true
	}
	_, ok = set[method]
	return ok
}
