package rpc

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

const hopRequestMessageField protowire.Number = 2

// HopMessage is a caller's message on a hop stream: on the wire, a HopRequest whose message is Data,
// encoded without copying Data (the routing kas passes every request message this way).
type HopMessage struct {
	Data []byte
	// Shared, when set, is a buffer that Data is all of and that others hold references to (see
	// grpctool.RawFrame.Shared): the encoding takes a reference of its own for gRPC's write.
	Shared mem.Buffer
}

// MarshalBuffers encodes the envelope's head and hands Data on as it is.
func (m *HopMessage) MarshalBuffers() (mem.BufferSlice, bool) {
	head := protowire.AppendTag(make([]byte, 0, 12), hopRequestMessageField, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(m.Data)))
	if len(m.Data) == 0 {
		return mem.BufferSlice{mem.SliceBuffer(head)}, true
	}
	if m.Shared != nil {
		m.Shared.Ref()
		return mem.BufferSlice{mem.SliceBuffer(head), m.Shared}, true
	}
	return mem.BufferSlice{mem.SliceBuffer(head), mem.SliceBuffer(m.Data)}, true
}

// ParseHopRequest decodes one message of a hop stream from the routing kas. A message envelope (the
// common case) is read by hand and its payload is a slice of b; anything else is decoded as a
// HopRequest. Exactly one of payload (with isMessage), start or closeSend is set when err is nil.
func ParseHopRequest(b []byte) (payload []byte, isMessage bool, start *HopStart, closeSend bool, err error) {
	if num, typ, n := protowire.ConsumeTag(b); n > 0 && num == hopRequestMessageField && typ == protowire.BytesType {
		if v, m := protowire.ConsumeBytes(b[n:]); m > 0 && n+m == len(b) {
			return v, true, nil, false, nil
		}
	}
	var req HopRequest
	if err := grpctool.ProtoUnmarshal(b, &req); err != nil {
		return nil, false, nil, false, status.Errorf(codes.InvalidArgument, "hop stream: a message that is not a HopRequest: %v", err)
	}
	switch x := req.GetMsg().(type) {
	case *HopRequest_Start:
		return nil, false, x.Start, false, nil
	case *HopRequest_Message:
		return x.Message, true, nil, false, nil
	case *HopRequest_CloseSend:
		return nil, false, nil, true, nil
	default:
		return nil, false, nil, false, status.Error(codes.InvalidArgument, "hop stream: an empty HopRequest")
	}
}

// hopCallEndField is GatewayResponse.call_end.
const hopCallEndField protowire.Number = 8

// IsHopCallEnd reports whether b, one message of a hop stream from the gateway, is a GatewayResponse
// whose first field is call_end (the gateway sends call_end alone).
func IsHopCallEnd(b []byte) bool {
	num, typ, n := protowire.ConsumeTag(b)
	return n > 0 && num == hopCallEndField && typ == protowire.BytesType
}

// ParseHopCallEnd decodes a call_end message (see IsHopCallEnd).
func ParseHopCallEnd(b []byte) (*HopCallEnd, error) {
	var m GatewayResponse
	if err := grpctool.ProtoUnmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("hop stream: a bad call_end: %w", err)
	}
	end := m.GetCallEnd()
	if end == nil {
		return nil, fmt.Errorf("hop stream: a message that starts as call_end is something else")
	}
	return end, nil
}
