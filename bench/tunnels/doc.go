// Package tunnels puts every reverse tunnel the harness measures behind one small interface, so that
// this project's tunnel (reusable and single-use), its peers and direct gRPC run the same load, are
// measured the same way (idle cost, stalls) and reported side by side. It is harness code: the tunnel
// core never imports it, and it never imports bench (bench imports it).
//
// # What an adapter does
//
// An Adapter starts the server side of a tunnel (where callers are: kas, a tunnel server). The Tunnel
// it returns then connects Config.Agents agents, ids 1..Agents, each serving the demo service
// (core/demo) behind the tunnel, and gives the load generator a grpc.ClientConnInterface per agent
// whose calls reach that agent through the tunnel. Close ends everything it started: every goroutine,
// listener and connection (the tests check with goleak). Start measures idle cost itself, between the
// server's start and the agents' (see IdleCost), so no adapter measures its own.
//
// # Adding your own tunnel
//
// One file in this package (or in yours, imported for its side effect) is enough:
//
//	func init() {
//		Register(Registration{Name: "mytunnel", Kind: KindPeer, About: "example.com/mytunnel v1.2.3",
//			Adapter: StartFunc(startMyTunnel)})
//	}
//
//	func startMyTunnel(ctx context.Context, cfg Config) (Tunnel, error) {
//		// Start the server side on loopback and return a Tunnel whose ConnectAgents starts agents
//		// 1..cfg.Agents, each registering its services with cfg.RegisterServices(id, s) (the demo
//		// service unless a test says otherwise), and waits until each can be called; whose Conn(id)
//		// reaches agent id (cfg.CheckAgent); and whose Close stops both sides and every goroutine
//		// they started. Agent id connects to the server with cfg.AgentDial when it is set
//		// (grpc.WithContextDialer, a websocket dialer's NetDialContext, ...), every time it connects.
//	}
//
// AgentDial is what puts a chaos fault proxy on each agent's link (scenario run --tunnel NAME runs
// the agent->kas faults of a scenario against your tunnel); an adapter that ignores it still runs in
// bench, and scenario run says it cannot put faults on its links. An agent that comes back after its
// connection broke, as your tunnel's own agents do, is what the chaos scenarios measure.
//
// direct.go and trivial_adapter_test.go are the smallest complete examples. The tests run every
// registered adapter, yours included: unary 64 B and 1 MiB calls, a server stream and a bidi stream to
// each agent (each answering as itself), a leak check after Close (adapters_test.go), its idle cost,
// and 1 MiB calls from 16 callers (the full tier).
//
// # Stalls
//
// RunCase drives one case through a Tunnel with a progress watchdog: a tunnel that stops completing
// calls under load is reported as stalled, with a goroutine dump, instead of hanging the run.
package tunnels
