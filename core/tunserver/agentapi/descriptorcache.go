package agentapi

import (
	"crypto/sha256"
	"sync"

	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunserver/registry/descriptor"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Descriptor cache bounds: agents send the same descriptor on every tunnel, so a few entries serve a
// whole fleet.
const (
	descriptorCacheEntries  = 256
	descriptorCacheMaxBytes = 64 << 10
)

// descriptorCache maps the wire bytes of a first message to the descriptor index they decode to, so
// that the same descriptor is decoded and indexed once, not once per tunnel.
type descriptorCache struct {
	// maxBytes bounds a descriptor's encoding; zero means descriptor.DefaultMaxBytes.
	maxBytes int
	mu       sync.Mutex
	entries  map[[sha256.Size]byte]descriptor.Index
}

// index decodes the first message of a tunnel and returns its descriptor's index. Anything but a valid
// descriptor is an InvalidArgument status.
func (c *descriptorCache) index(data []byte) (descriptor.Index, error) {
	limit := c.maxBytes
	if limit <= 0 {
		limit = descriptor.DefaultMaxBytes
	}
	if len(data) > limit {
		return descriptor.Index{}, status.Errorf(codes.ResourceExhausted, "descriptor is %d bytes, the limit (--max-descriptor-bytes) is %d", len(data), limit)
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
		return descriptor.Index{}, status.Errorf(codes.InvalidArgument, "first message is not a ConnectRequest: %v", err)
	}
	checker := rpc.NewChecker(rpc.AgentToKas)
	if err := checker.Next(rpc.AgentState(&first)); err != nil {
		return descriptor.Index{}, err
	}
	d, err := descriptor.NewIndex(first.GetDescriptor_().GetAgentDescriptor())
	if err != nil {
		return descriptor.Index{}, status.Error(codes.InvalidArgument, err.Error())
	}
	d.Reuse = first.GetDescriptor_().GetReuse()
	d.Batches = first.GetDescriptor_().GetBatches()
	d.EndsOnRequest = first.GetDescriptor_().GetEndsOnRequest()
	if cacheable {
		c.mu.Lock()
		if c.entries == nil || len(c.entries) >= descriptorCacheEntries {
			c.entries = make(map[[sha256.Size]byte]descriptor.Index)
		}
		c.entries[key] = d
		c.mu.Unlock()
	}
	return d, nil
}
