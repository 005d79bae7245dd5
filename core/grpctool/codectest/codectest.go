// Package codectest checks grpctool's protobuf fast path (vtprotobuf's generated code) against protobuf
// itself, for the fuzz tests of the packages whose messages it encodes and decodes.
package codectest

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tunnelbench/tunnelbench/core/grpctool"
)

// Agree decodes b as a message of m's type with protobuf and with grpctool.ProtoUnmarshal, and checks:
//   - whatever protobuf accepts, in protobuf's own encoding, ProtoUnmarshal reads the same;
//   - what ProtoUnmarshal reads, ProtoMarshal writes as bytes that ProtoUnmarshal reads the same, and that
//     protobuf reads the same where it accepted b.
//
// ProtoUnmarshal may accept what protobuf refuses (a FastDecoder only comes from kas, see grpctool), so
// that is not checked.
func Agree(b []byte, m proto.Message) error {
	slow := m.ProtoReflect().New().Interface()
	slowErr := proto.Unmarshal(b, slow)
	if slowErr == nil {
		// Without the fields protobuf did not know: the fast path may refuse those (a known field number
		// with another wire type).
		known := proto.Clone(slow)
		discardUnknown(known.ProtoReflect())
		canonical, err := proto.Marshal(known)
		if err != nil {
			return fmt.Errorf("%T: protobuf cannot encode %v: %v", m, known, err)
		}
		got := m.ProtoReflect().New().Interface()
		if err := grpctool.ProtoUnmarshal(canonical, got); err != nil || !proto.Equal(got, known) {
			return fmt.Errorf("%T: protobuf's % x decodes by the fast path to %v (%v), want %v", m, canonical, got, err, known)
		}
	}
	fast := m.ProtoReflect().New().Interface()
	if grpctool.ProtoUnmarshal(b, fast) != nil {
		return nil
	}
	enc, err := grpctool.ProtoMarshal(fast)
	if err != nil {
		return fmt.Errorf("%T: the fast path cannot encode what it decoded from % x: %v", m, b, err)
	}
	again := m.ProtoReflect().New().Interface()
	if err := grpctool.ProtoUnmarshal(enc, again); err != nil || !proto.Equal(again, fast) {
		return fmt.Errorf("%T: % x re-encoded as % x decodes to %v (%v), want %v", m, b, enc, again, err, fast)
	}
	if slowErr == nil {
		// Unknown fields aside: protobuf rewrites an unknown field's tag in its shortest form, the fast
		// path keeps the bytes it got.
		viaSlow := m.ProtoReflect().New().Interface()
		err := proto.Unmarshal(enc, viaSlow)
		known := proto.Clone(fast)
		discardUnknown(known.ProtoReflect())
		discardUnknown(viaSlow.ProtoReflect())
		if err != nil || !proto.Equal(viaSlow, known) {
			return fmt.Errorf("%T: % x re-encoded by the fast path as % x decodes by protobuf to %v (%v), want %v", m, b, enc, viaSlow, err, known)
		}
	}
	return nil
}

func discardUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				discardUnknown(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				discardUnknown(mv.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			discardUnknown(v.Message())
		}
		return true
	})
}
