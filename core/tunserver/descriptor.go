package tunserver

import (
	"crypto/sha256"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// Bounds on a descriptor, so that one agent cannot make kas hold an arbitrary amount of memory per tunnel.
const (
	MaxDescriptorServices = 1000
	MaxDescriptorMethods  = 10000
	// DefaultMaxDescriptorBytes bounds the encoded first message, whatever the message size limit is.
	DefaultMaxDescriptorBytes = 1 << 20
)

// descriptorIndex answers "does this tunnel serve that method" in constant time.
type descriptorIndex struct {
	// services maps a service name to its methods; a nil set means every method.
	services map[string]map[string]struct{}
}

func newDescriptorIndex(d *rpc.AgentDescriptor) (descriptorIndex, error) {
	if len(d.GetServices()) > MaxDescriptorServices {
		return descriptorIndex{}, fmt.Errorf("descriptor lists %d services, the limit is %d", len(d.GetServices()), MaxDescriptorServices)
	}
	idx := descriptorIndex{services: make(map[string]map[string]struct{}, len(d.GetServices()))}
	methods := 0
	for _, s := range d.GetServices() {
		if s.GetName() == "" {
			return descriptorIndex{}, fmt.Errorf("descriptor has a service without a name")
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
			set = make(map[string]struct{}, len(s.GetMethods()))
			idx.services[s.GetName()] = set
		}
		for _, m := range s.GetMethods() {
			if m.GetName() == "" {
				return descriptorIndex{}, fmt.Errorf("descriptor service %s has a method without a name", s.GetName())
			}
			set[m.GetName()] = struct{}{}
		}
		methods += len(s.GetMethods())
		if methods > MaxDescriptorMethods {
			return descriptorIndex{}, fmt.Errorf("descriptor lists more than %d methods", MaxDescriptorMethods)
		}
	}
	return idx, nil
}

func (d descriptorIndex) supports(service, method string) bool {
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

// Descriptor cache bounds: agents send the same descriptor on every tunnel, so a few entries serve a
// whole fleet.
const (
	descriptorCacheEntries  = 256
	descriptorCacheMaxBytes = 64 << 10
)

// descriptorCache maps the wire bytes of a first message to the descriptor index they decode to, so
// that the same descriptor is decoded and indexed once, not once per tunnel.
type descriptorCache struct {
	// maxBytes bounds a descriptor's encoding; zero means DefaultMaxDescriptorBytes.
	maxBytes int
	mu       sync.Mutex
	entries  map[[sha256.Size]byte]descriptorIndex
}

// index decodes the first message of a tunnel and returns its descriptor's index. Anything but a valid
// descriptor is an InvalidArgument status.
func (c *descriptorCache) index(data []byte) (descriptorIndex, error) {
	limit := c.maxBytes
	if limit <= 0 {
		limit = DefaultMaxDescriptorBytes
	}
	if len(data) > limit {
		return descriptorIndex{}, status.Errorf(codes.ResourceExhausted, "descriptor is %d bytes, the limit (--max-descriptor-bytes) is %d", len(data), limit)
	}
	cacheable := len(data) <= descriptorCacheMaxBytes
	var key [sha256.Size]byte
	if cacheable {
		key = sha256.Sum256(data)
		c.mu.Lock()
		d, ok := c.entries[key]
		c.mu.Unlock()
		if ok {
			return d, nil
		}
	}
	var first rpc.ConnectRequest
	if err := proto.Unmarshal(data, &first); err != nil {
		return descriptorIndex{}, status.Errorf(codes.InvalidArgument, "first message is not a ConnectRequest: %v", err)
	}
	checker := rpc.NewChecker(rpc.AgentToKas)
	if err := checker.Next(rpc.AgentState(&first)); err != nil {
		return descriptorIndex{}, err
	}
	d, err := newDescriptorIndex(first.GetDescriptor_().GetAgentDescriptor())
	if err != nil {
		return descriptorIndex{}, status.Error(codes.InvalidArgument, err.Error())
	}
	if cacheable {
		c.mu.Lock()
		if c.entries == nil || len(c.entries) >= descriptorCacheEntries {
			c.entries = make(map[[sha256.Size]byte]descriptorIndex)
		}
		c.entries[key] = d
		c.mu.Unlock()
	}
	return d, nil
}
