package httptunnel

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// TestOrderTables checks every transition of both tables: the allowed ones, and a violation for each
// other pair, with both states named.
func TestOrderTables(t *testing.T) {
	states := []rpc.State{rpc.StateStart, StateHeader, StateBody, StateEnd, rpc.StateEOF, rpc.StateEmpty}
	allowed := map[[2]rpc.State]bool{
		{rpc.StateStart, StateHeader}: true,
		{StateHeader, StateBody}:      true,
		{StateHeader, StateEnd}:       true,
		{StateBody, StateBody}:        true,
		{StateBody, StateEnd}:         true,
		{StateEnd, rpc.StateEOF}:      true,
	}
	for _, table := range []*rpc.Table{RequestOrder, ResponseOrder} {
		for _, from := range states {
			for _, to := range states {
				if got, want := table.Allows(from, to), allowed[[2]rpc.State{from, to}]; got != want {
					t.Errorf("%s: %s -> %s allowed=%v, want %v", table.Name(), from, to, got, want)
				}
			}
		}
		c := rpc.NewChecker(table)
		for _, s := range []rpc.State{StateHeader, StateBody, StateBody, StateEnd} {
			if err := c.Next(s); err != nil {
				t.Fatalf("%s: %v", table.Name(), err)
			}
		}
		err := c.Next(StateBody)
		want := fmt.Sprintf("%s: body is not allowed after end", table.Name())
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
			t.Errorf("got %v, want InvalidArgument %q", err, want)
		}
		if err := c.Next(rpc.StateEOF); err != nil {
			t.Errorf("the state changed on a violation: %v", err)
		}
	}
}

func TestMessageStates(t *testing.T) {
	for m, want := range map[*HTTPRequest]rpc.State{
		{}:                            rpc.StateEmpty,
		{Msg: &HTTPRequest_Header_{}}: StateHeader,
		{Msg: &HTTPRequest_Body{}}:    StateBody,
		{Msg: &HTTPRequest_End_{}}:    StateEnd,
	} {
		if got := RequestState(m); got != want {
			t.Errorf("RequestState(%v) = %s, want %s", m, got, want)
		}
	}
	for m, want := range map[*HTTPResponse]rpc.State{
		{}:                             rpc.StateEmpty,
		{Msg: &HTTPResponse_Header_{}}: StateHeader,
		{Msg: &HTTPResponse_Body{}}:    StateBody,
		{Msg: &HTTPResponse_End_{}}:    StateEnd,
	} {
		if got := ResponseState(m); got != want {
			t.Errorf("ResponseState(%v) = %s, want %s", m, got, want)
		}
	}
}
