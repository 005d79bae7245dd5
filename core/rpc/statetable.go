package rpc

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// State is the last thing seen on one direction of a stream: the kind of the last message, or a start or
// end marker.
type State string

// States shared by the tables below.
const (
	StateStart State = "start"
	StateEOF   State = "EOF"
	// StateEmpty is a message whose oneof has no field set. No table allows it.
	StateEmpty State = "empty message"

	StateDescriptor     State = "descriptor"
	StateHeader         State = "header"
	StateMessage        State = "message"
	StateTrailer        State = "trailer"
	StateError          State = "error"
	StateRequestInfo    State = "request_info"
	StateCloseSend      State = "close_send"
	StateNoTunnel       State = "no_tunnel"
	StateTunnelReady    State = "tunnel_ready"
	StateStartStreaming State = "start_streaming"
	StateCallEnd        State = "call_end"
	// StateBatch is a batch where the table's messages are expected: a batch inside a batch, or one on a
	// tunnel that did not agree to batches (see BatchedConnectServer). No table allows it.
	StateBatch State = "batch"
	// StateEndTunnel is kas's EndTunnel, which the agent's stream takes before any table sees it (see
	// EndingConnectClient). No table allows it.
	StateEndTunnel State = "end_tunnel"
)

// Table is the allowed order of messages on one direction of one kind of stream. It is written down once
// here; every stream is checked against it with a Checker.
type Table struct {
	name  string
	allow map[State][]State
}

// NewTable returns a table named name (used in violation messages) that allows the given moves. Other
// protocols carried through the tunnel (HTTP, for one) declare their order with it.
func NewTable(name string, allow map[State][]State) *Table {
	return &Table{name: name, allow: allow}
}

// Name says which stream direction the table describes, for messages.
func (t *Table) Name() string { return t.name }

// Allows reports whether to may follow from.
func (t *Table) Allows(from, to State) bool {
	for _, s := range t.allow[from] {
		if s == to {
			return true
		}
	}
	return false
}

var (
	// AgentToKas is what an agent sends on a tunnel. After the descriptor the agent either answers a call
	// (header first), fails it before any header (error), or withdraws the idle tunnel (EOF): a withdrawn
	// tunnel has accepted no call, so kas may give that call to another tunnel.
	AgentToKas = &Table{name: "agent->kas tunnel", allow: map[State][]State{
		StateStart:      {StateDescriptor},
		StateDescriptor: {StateHeader, StateError, StateEOF},
		StateHeader:     {StateMessage, StateTrailer},
		StateMessage:    {StateMessage, StateTrailer},
		StateTrailer:    {StateError, StateEOF},
		StateError:      {StateEOF},
	}}

	// KasToAgent is what kas sends on a tunnel. kas may end the stream at any point (EOF) once the call
	// has its answer, even when the caller never half-closed.
	KasToAgent = &Table{name: "kas->agent tunnel", allow: map[State][]State{
		StateStart:       {StateRequestInfo, StateEOF},
		StateRequestInfo: {StateMessage, StateCloseSend, StateEOF},
		StateMessage:     {StateMessage, StateCloseSend, StateEOF},
		StateCloseSend:   {StateEOF},
	}}

	// AgentToKasReuse is what an agent sends on a reusable tunnel: per call header, message*, trailer,
	// [error] and call_end, or error and call_end; call_end may come early once kas ended the call (kas
	// then checks that it did). After call_end the next call's answer, or EOF. The agent may end the
	// stream after an answer without its call_end (the tunnel is then not reused).
	AgentToKasReuse = &Table{name: "agent->kas reusable tunnel", allow: map[State][]State{
		StateStart:      {StateDescriptor},
		StateDescriptor: {StateHeader, StateError, StateCallEnd, StateEOF},
		StateHeader:     {StateMessage, StateTrailer, StateCallEnd},
		StateMessage:    {StateMessage, StateTrailer, StateCallEnd},
		StateTrailer:    {StateError, StateCallEnd, StateEOF},
		StateError:      {StateCallEnd, StateEOF},
		StateCallEnd:    {StateHeader, StateError, StateCallEnd, StateEOF},
	}}

	// KasToAgentReuse is what kas sends on a reusable tunnel: per call request_info, message*,
	// [close_send] and call_end; the next call's request_info only after call_end. kas may end the stream
	// at any point.
	KasToAgentReuse = &Table{name: "kas->agent reusable tunnel", allow: map[State][]State{
		StateStart:       {StateRequestInfo, StateEOF},
		StateRequestInfo: {StateMessage, StateCloseSend, StateCallEnd, StateEOF},
		StateMessage:     {StateMessage, StateCloseSend, StateCallEnd, StateEOF},
		StateCloseSend:   {StateCallEnd, StateEOF},
		StateCallEnd:     {StateRequestInfo, StateEOF},
	}}

	// GatewayToRouting is what a gateway kas sends to the routing kas on the private API.
	GatewayToRouting = &Table{name: "gateway->routing kas", allow: map[State][]State{
		StateStart:       {StateNoTunnel, StateTunnelReady},
		StateNoTunnel:    {StateTunnelReady},
		StateTunnelReady: {StateHeader, StateError},
		StateHeader:      {StateMessage, StateTrailer},
		StateMessage:     {StateMessage, StateTrailer},
		StateTrailer:     {StateError, StateEOF},
		StateError:       {StateEOF},
	}}

	// GatewayToRoutingEager is what a gateway kas sends on an eager stream (GatewayEagerKey): the call at
	// once on an idle tunnel, or no_tunnel and the end, having read nothing.
	GatewayToRoutingEager = &Table{name: "gateway->routing kas (eager)", allow: map[State][]State{
		StateStart:       {StateNoTunnel, StateTunnelReady},
		StateNoTunnel:    {StateEOF},
		StateTunnelReady: {StateHeader, StateError},
		StateHeader:      {StateMessage, StateTrailer},
		StateMessage:     {StateMessage, StateTrailer},
		StateTrailer:     {StateError, StateEOF},
		StateError:       {StateEOF},
	}}

	// RoutingToGateway is what the routing kas sends to a gateway kas: StartStreaming (only to the gateway
	// it picked), then the caller's raw frames.
	RoutingToGateway = &Table{name: "routing->gateway kas", allow: map[State][]State{
		StateStart:          {StateStartStreaming},
		StateStartStreaming: {StateMessage, StateEOF},
		StateMessage:        {StateMessage, StateEOF},
	}}
)

// Checker follows one direction of one stream through its Table. The zero value is not usable; use
// NewChecker. A Checker is not safe for concurrent use: one direction has one reader.
type Checker struct {
	table *Table
	state State
}

// NewChecker starts a checker in StateStart.
func NewChecker(t *Table) Checker {
	return Checker{table: t, state: StateStart}
}

// State is the last state accepted.
func (c *Checker) State() State { return c.state }

// Next moves to the state to, or returns an InvalidArgument status naming both states when the table does
// not allow it. The state does not change on error.
func (c *Checker) Next(to State) error {
	if !c.table.Allows(c.state, to) {
		return status.Error(codes.InvalidArgument, c.violation(to))
	}
	c.state = to
	return nil
}

func (c *Checker) violation(to State) string {
	return fmt.Sprintf("%s: %s is not allowed after %s", c.table.name, to, c.state)
}

// AgentState is the state a ConnectRequest moves the AgentToKas table to.
func AgentState(m *ConnectRequest) State {
	switch m.GetMsg().(type) {
	case *ConnectRequest_Descriptor_:
		return StateDescriptor
	case *ConnectRequest_Header:
		return StateHeader
	case *ConnectRequest_Message:
		return StateMessage
	case *ConnectRequest_Trailer:
		return StateTrailer
	case *ConnectRequest_Error:
		return StateError
	case *ConnectRequest_CallEnd:
		return StateCallEnd
	case *ConnectRequest_Batch:
		return StateBatch
	default:
		return StateEmpty
	}
}

// KasState is the state a ConnectResponse moves the KasToAgent table to.
func KasState(m *ConnectResponse) State {
	switch m.GetMsg().(type) {
	case *ConnectResponse_RequestInfo:
		return StateRequestInfo
	case *ConnectResponse_Message:
		return StateMessage
	case *ConnectResponse_CloseSend:
		return StateCloseSend
	case *ConnectResponse_CallEnd:
		return StateCallEnd
	case *ConnectResponse_Batch:
		return StateBatch
	case *ConnectResponse_EndTunnel:
		return StateEndTunnel
	default:
		return StateEmpty
	}
}

// GatewayState is the state a GatewayResponse moves the GatewayToRouting table to.
func GatewayState(m *GatewayResponse) State {
	switch m.GetMsg().(type) {
	case *GatewayResponse_TunnelReady_:
		return StateTunnelReady
	case *GatewayResponse_NoTunnel_:
		return StateNoTunnel
	case *GatewayResponse_Header:
		return StateHeader
	case *GatewayResponse_Message:
		return StateMessage
	case *GatewayResponse_Trailer:
		return StateTrailer
	case *GatewayResponse_Error:
		return StateError
	case *GatewayResponse_Batch:
		return StateBatch
	default:
		return StateEmpty
	}
}
