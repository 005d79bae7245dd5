// Package httptunnel carries HTTP through the reverse tunnel: kas serves HTTP and forwards each request
// to an agent as one HTTPTunnel.Exchange stream; the agent replays it against a local HTTP server and
// streams the response back. Bodies stream both ways in bounded chunks: it never holds a body whole,
// and never lets a failed response end as if it were complete.
//
// One exchange is: kas -> agent header, body*, end, EOF; agent -> kas header, body*, end, EOF.
// RequestOrder and ResponseOrder declare that order; both sides check every stream against it and
// answer a violation with InvalidArgument naming both states.
//
// # kas side
//
// NewHandler forwards PathPrefix + "{agentID}/{rest}" to agent agentID as "/{rest}", query kept, with
// hop-by-hop header fields removed and Via added in both directions. Failures before the response
// header are one line of text: 400 (bad agent id, a path that could lead out of the upstream's base
// path, or unreadable request body), 504 (no tunnel to the agent within kas's find timeout), 502
// (anything else: agent, upstream or protocol). After the header, a failure aborts the response
// (connection closed, or HTTP/2 stream reset). A client that goes away cancels the exchange, and with it
// the upstream request. Wiring in kas (--http-listen, default DefaultListen):
//
//	srv := httptunnel.NewServer(httptunnel.NewHandler(k.InternalConn(), httptunnel.WithLogger(log)), addr)
//	go srv.Serve(listener)                // HTTP/1.1 and h2c
//	...
//	srv.Shutdown(ctx)                     // before k.Shutdown: exchanges in flight use the tunnels
//
// # agent side
//
// Upstream serves HTTPTunnel by sending each exchange to one base URL with a streaming HTTP client: no
// redirects followed, no transparent decompression, no environment proxy. Upstream failures are
// Unavailable naming the upstream; a request path that could lead out of the base path is refused with
// InvalidArgument, whatever kas sent. Wiring in agentk (--http-upstream URL), before the agent starts:
//
//	up, err := httptunnel.Register(agent, upstreamURL, httptunnel.WithLogger(log))
//	...
//	agent.Start()
//	...
//	agent.Stop(ctx)
//	up.Close()
//
// Not carried: CONNECT, protocol upgrades (WebSocket; answered 501), request trailers, 1xx
// informational responses.
package httptunnel
