package httptunnel

import (
	"github.com/tunnelbench/tunnelbench/core/rpc"
)

// States of an exchange stream, in both directions. StateStart, StateEOF and StateEmpty come from rpc.
const (
	StateHeader rpc.State = "header"
	StateBody   rpc.State = "body"
	StateEnd    rpc.State = "end"
)

var (
	// RequestOrder is what kas sends on an exchange: header, body*, end, EOF. kas never half-closes
	// before the end of the body: a request body it could not read whole cancels the call instead, so
	// that the upstream never takes a truncated body for a complete one.
	RequestOrder = rpc.NewTable("kas->agent http request", map[rpc.State][]rpc.State{
		rpc.StateStart: {StateHeader},
		StateHeader:    {StateBody, StateEnd},
		StateBody:      {StateBody, StateEnd},
		StateEnd:       {rpc.StateEOF},
	})

	// ResponseOrder is what the agent sends on an exchange: header, body*, end, EOF. A failure is the
	// call's status, not a message; end means the upstream's body arrived whole.
	ResponseOrder = rpc.NewTable("agent->kas http response", map[rpc.State][]rpc.State{
		rpc.StateStart: {StateHeader},
		StateHeader:    {StateBody, StateEnd},
		StateBody:      {StateBody, StateEnd},
		StateEnd:       {rpc.StateEOF},
	})
)

// RequestState is the state an HTTPRequest moves the RequestOrder table to.
func RequestState(m *HTTPRequest) rpc.State {
	switch m.GetMsg().(type) {
	case *HTTPRequest_Header_:
		return StateHeader
	case *HTTPRequest_Body:
		return StateBody
	case *HTTPRequest_End_:
		return StateEnd
	default:
		return rpc.StateEmpty
	}
}

// ResponseState is the state an HTTPResponse moves the ResponseOrder table to.
func ResponseState(m *HTTPResponse) rpc.State {
	switch m.GetMsg().(type) {
	case *HTTPResponse_Header_:
		return StateHeader
	case *HTTPResponse_Body:
		return StateBody
	case *HTTPResponse_End_:
		return StateEnd
	default:
		return rpc.StateEmpty
	}
}
