package rpc

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
)

// A caller's message encoded by hand reads back as the same payload, and as protobuf would encode it.
func TestHopMessageRoundTrip(t *testing.T) {
	for _, data := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte{7}, 70_000)} {
		bs, ok := (&HopMessage{Data: data}).MarshalBuffers()
		if !ok {
			t.Fatal("MarshalBuffers refused")
		}
		b := bs.Materialize()
		want, err := proto.Marshal(&HopRequest{Msg: &HopRequest_Message{Message: data}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("%d bytes: hand encoding differs from protobuf's", len(data))
		}
		payload, isMessage, start, closeSend, err := ParseHopRequest(b)
		if err != nil || !isMessage || start != nil || closeSend || !bytes.Equal(payload, data) {
			t.Fatalf("%d bytes: parsed as message %v, start %v, close_send %v, %d bytes, err %v", len(data), isMessage, start, closeSend, len(payload), err)
		}
	}
}

// Start and close_send parse as themselves; an empty or broken HopRequest is refused.
func TestParseHopRequest(t *testing.T) {
	start, err := proto.Marshal(&HopRequest{Msg: &HopRequest_Start{Start: &HopStart{Method: "/s/m"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, st, _, err := ParseHopRequest(start); err != nil || st.GetMethod() != "/s/m" {
		t.Fatalf("start: %v, %v", st, err)
	}
	cs, err := proto.Marshal(&HopRequest{Msg: &HopRequest_CloseSend{CloseSend: &CloseSend{}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, closeSend, err := ParseHopRequest(cs); err != nil || !closeSend {
		t.Fatalf("close_send: %v, %v", closeSend, err)
	}
	for name, b := range map[string][]byte{"empty": {}, "truncated": {0x12, 0x05, 'a'}, "garbage": {0xff, 0xff}} {
		if _, _, _, _, err := ParseHopRequest(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// call_end is told apart from every other gateway message by its first bytes.
func TestHopCallEnd(t *testing.T) {
	end, err := proto.Marshal(&GatewayResponse{Msg: &GatewayResponse_CallEnd{CallEnd: &HopCallEnd{Trailer: map[string]*Values{"k": {Value: [][]byte{[]byte("v")}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !IsHopCallEnd(end) {
		t.Fatal("call_end not recognized")
	}
	if e, err := ParseHopCallEnd(end); err != nil || string(e.GetTrailer()["k"].GetValue()[0]) != "v" {
		t.Fatalf("ParseHopCallEnd: %v, %v", e, err)
	}
	for _, m := range []*GatewayResponse{
		{Msg: &GatewayResponse_TunnelReady_{TunnelReady: &GatewayResponse_TunnelReady{}}},
		{Msg: &GatewayResponse_Message{Message: &Message{Data: []byte("x")}}},
		{Msg: &GatewayResponse_Batch{Batch: &GatewayBatch{}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if IsHopCallEnd(b) {
			t.Errorf("%v taken for call_end", m)
		}
	}
}

// Whatever a peer kas sends on a hop stream, parsing never panics, and a message reads back whole.
func FuzzHopDecode(f *testing.F) {
	for _, m := range []proto.Message{
		&HopRequest{Msg: &HopRequest_Start{Start: &HopStart{Method: "/s/m", Meta: map[string]*Values{"a": {Value: [][]byte{[]byte("b")}}}}}},
		&HopRequest{Msg: &HopRequest_Message{Message: []byte("payload")}},
		&HopRequest{Msg: &HopRequest_CloseSend{CloseSend: &CloseSend{}}},
		&GatewayResponse{Msg: &GatewayResponse_CallEnd{CallEnd: &HopCallEnd{}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, isMessage, _, _, err := ParseHopRequest(b)
		if err == nil && isMessage {
			again, ok := (&HopMessage{Data: payload}).MarshalBuffers()
			if !ok {
				t.Fatal("MarshalBuffers refused")
			}
			if p2, ok2, _, _, err := ParseHopRequest(again.Materialize()); err != nil || !ok2 || !bytes.Equal(p2, payload) {
				t.Fatalf("a message does not read back: %v", err)
			}
		}
		if IsHopCallEnd(b) {
			_, _ = ParseHopCallEnd(b)
		}
	})
}
