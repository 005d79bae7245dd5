package rpc

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func run(t *Table, states ...State) error {
	c := NewChecker(t)
	for _, s := range states {
		if err := c.Next(s); err != nil {
			return err
		}
	}
	return nil
}

func TestAllowedSequences(t *testing.T) {
	ok := []struct {
		table  *Table
		states []State
	}{
		{AgentToKas, []State{StateDescriptor, StateHeader, StateMessage, StateMessage, StateTrailer, StateEOF}},
		{AgentToKas, []State{StateDescriptor, StateHeader, StateTrailer, StateError, StateEOF}},
		{AgentToKas, []State{StateDescriptor, StateError, StateEOF}},
		{AgentToKas, []State{StateDescriptor, StateEOF}},
		{KasToAgent, []State{StateRequestInfo, StateMessage, StateCloseSend, StateEOF}},
		{KasToAgent, []State{StateRequestInfo, StateEOF}},
		{KasToAgent, []State{StateEOF}},
		{GatewayToRouting, []State{StateNoTunnel, StateTunnelReady, StateHeader, StateMessage, StateTrailer, StateEOF}},
		{GatewayToRouting, []State{StateTunnelReady, StateError, StateEOF}},
		{RoutingToGateway, []State{StateStartStreaming, StateMessage, StateMessage, StateEOF}},
		{GatewayToRoutingEager, []State{StateNoTunnel, StateEOF}},
		{GatewayToRoutingEager, []State{StateTunnelReady, StateHeader, StateMessage, StateTrailer, StateEOF}},
		// Reusable tunnels: calls one after another, each closed by call_end.
		{AgentToKasReuse, []State{StateDescriptor, StateHeader, StateMessage, StateTrailer, StateCallEnd, StateError, StateCallEnd, StateHeader, StateTrailer, StateError, StateCallEnd, StateEOF}},
		{AgentToKasReuse, []State{StateDescriptor, StateCallEnd, StateCallEnd, StateHeader, StateMessage, StateCallEnd, StateEOF}},
		{AgentToKasReuse, []State{StateDescriptor, StateHeader, StateTrailer, StateEOF}},
		{KasToAgentReuse, []State{StateRequestInfo, StateMessage, StateCloseSend, StateCallEnd, StateRequestInfo, StateCallEnd, StateRequestInfo, StateMessage, StateEOF}},
	}
	for _, c := range ok {
		if err := run(c.table, c.states...); err != nil {
			t.Errorf("%s %v: %v", c.table.Name(), c.states, err)
		}
	}
}

func TestViolationsNameBothStates(t *testing.T) {
	bad := []struct {
		table    *Table
		states   []State
		from, to State
	}{
		{AgentToKas, []State{StateHeader}, StateStart, StateHeader},
		{AgentToKas, []State{StateDescriptor, StateDescriptor}, StateDescriptor, StateDescriptor},
		{AgentToKas, []State{StateDescriptor, StateTrailer}, StateDescriptor, StateTrailer},
		{AgentToKas, []State{StateDescriptor, StateHeader, StateHeader}, StateHeader, StateHeader},
		{AgentToKas, []State{StateDescriptor, StateEmpty}, StateDescriptor, StateEmpty},
		{AgentToKas, []State{StateDescriptor, StateHeader, StateEOF}, StateHeader, StateEOF},
		{AgentToKas, []State{StateDescriptor, StateError, StateHeader}, StateError, StateHeader},
		{KasToAgent, []State{StateMessage}, StateStart, StateMessage},
		{KasToAgent, []State{StateRequestInfo, StateRequestInfo}, StateRequestInfo, StateRequestInfo},
		{KasToAgent, []State{StateRequestInfo, StateCloseSend, StateMessage}, StateCloseSend, StateMessage},
		{GatewayToRouting, []State{StateHeader}, StateStart, StateHeader},
		{GatewayToRouting, []State{StateTunnelReady, StateNoTunnel}, StateTunnelReady, StateNoTunnel},
		{RoutingToGateway, []State{StateMessage}, StateStart, StateMessage},
		// An eager gateway that had no tunnel has read nothing: it must not start the call later.
		{GatewayToRoutingEager, []State{StateNoTunnel, StateTunnelReady}, StateNoTunnel, StateTunnelReady},
		// A single-use tunnel knows no call_end; a reusable one takes the next call only after it.
		{AgentToKas, []State{StateDescriptor, StateHeader, StateTrailer, StateCallEnd}, StateTrailer, StateCallEnd},
		{KasToAgent, []State{StateRequestInfo, StateCallEnd}, StateRequestInfo, StateCallEnd},
		{KasToAgentReuse, []State{StateRequestInfo, StateRequestInfo}, StateRequestInfo, StateRequestInfo},
		{KasToAgentReuse, []State{StateRequestInfo, StateCloseSend, StateRequestInfo}, StateCloseSend, StateRequestInfo},
		{AgentToKasReuse, []State{StateDescriptor, StateHeader, StateHeader}, StateHeader, StateHeader},
		{AgentToKasReuse, []State{StateDescriptor, StateHeader, StateEOF}, StateHeader, StateEOF},
		{AgentToKasReuse, []State{StateDescriptor, StateError, StateMessage}, StateError, StateMessage},
	}
	for _, c := range bad {
		err := run(c.table, c.states...)
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument {
			t.Errorf("%s %v: %v, want InvalidArgument", c.table.Name(), c.states, err)
			continue
		}
		if !strings.Contains(st.Message(), string(c.from)) || !strings.Contains(st.Message(), string(c.to)) || !strings.Contains(st.Message(), c.table.Name()) {
			t.Errorf("%s %v: message %q does not name %s and %s", c.table.Name(), c.states, st.Message(), c.from, c.to)
		}
	}
}

func TestMessageStates(t *testing.T) {
	if s := AgentState(&ConnectRequest{}); s != StateEmpty {
		t.Errorf("empty ConnectRequest is %s", s)
	}
	if s := KasState(&ConnectResponse{Msg: &ConnectResponse_CloseSend{CloseSend: &CloseSend{}}}); s != StateCloseSend {
		t.Errorf("close_send is %s", s)
	}
	if s := GatewayState(&GatewayResponse{Msg: &GatewayResponse_NoTunnel_{NoTunnel: &GatewayResponse_NoTunnel{}}}); s != StateNoTunnel {
		t.Errorf("no_tunnel is %s", s)
	}
}

var allStates = []State{StateStart, StateEOF, StateEmpty, StateDescriptor, StateHeader, StateMessage, StateTrailer,
	StateError, StateRequestInfo, StateCloseSend, StateNoTunnel, StateTunnelReady, StateStartStreaming, StateCallEnd}

// FuzzStateTable drives every table with arbitrary sequences: the checker never panics, accepts a move
// only when the table allows it, and never changes state on a rejected move.
func FuzzStateTable(f *testing.F) {
	f.Add([]byte{0, 3, 4, 5, 6, 1})
	f.Add([]byte{1, 8, 5, 9, 1})
	f.Add([]byte{2, 11, 4, 6, 1})
	f.Add([]byte{3, 12, 5, 1})
	tables := []*Table{AgentToKas, KasToAgent, GatewayToRouting, RoutingToGateway, AgentToKasReuse, KasToAgentReuse, GatewayToRoutingEager}
	f.Fuzz(func(t *testing.T, seq []byte) {
		if len(seq) == 0 {
			return
		}
		tbl := tables[int(seq[0])%len(tables)]
		c := NewChecker(tbl)
		for _, b := range seq[1:] {
			to := allStates[int(b)%len(allStates)]
			from := c.State()
			err := c.Next(to)
			if tbl.Allows(from, to) != (err == nil) {
				t.Fatalf("%s: %s -> %s: allowed=%v err=%v", tbl.Name(), from, to, tbl.Allows(from, to), err)
			}
			if err != nil && c.State() != from {
				t.Fatalf("state changed on a rejected move")
			}
		}
	})
}

func TestMetadataRoundTrip(t *testing.T) {
	md := map[string][]string{"a": {"1", "2"}, "b-bin": {string([]byte{0, 255})}}
	got := ValuesToMeta(MetaToValues(md))
	if len(got) != 2 || got["a"][1] != "2" || got["b-bin"][0] != string([]byte{0, 255}) {
		t.Fatalf("round trip: %v", got)
	}
	if ValuesToMeta(map[string]*Values{"empty": {}}) != nil && len(ValuesToMeta(map[string]*Values{"empty": {}})) != 0 {
		t.Fatal("a key without values survived")
	}
}
