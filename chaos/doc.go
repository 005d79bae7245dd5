// Package chaos injects faults into a topology: network faults on loopback proxies placed on each
// link (toxiproxy embedded as a library, no separate process) and process faults (kill or stop a kas,
// kill or restart agents, stop Redis) acted out on a Target the harness provides.
//
// Every fault is one small file with one type that registers itself by name, like toxiproxy's toxics.
// Every change is bounded by a context and fails with the reason. This package never imports the
// tunnel core: it only moves bytes between sockets and calls the Target.
//
// Toxiproxy's limits, which scenarios must design around:
//
//   - A toxic applies to whole TCP connections. A partial fault ("20% of agents") needs several
//     proxies: one proxy per agent on the agent->kas link, and a selection of those proxies.
//   - reset-peer acts when the next bytes arrive in its direction, and only connections accepted
//     after it was added get a real TCP RST (toxiproxy sets SO_LINGER 0 when a connection starts);
//     connections that already existed end with an ordinary close (FIN) instead. Idle connections
//     carry on until they carry data (gRPC keepalive pings count).
//   - A black hole drops bytes silently: the peers notice only through their own timeouts and
//     keepalives. Removing it closes the connections it held (toxiproxy's timeout toxic closes them
//     on cleanup), so traffic comes back on new connections.
//   - link-down disables the proxy: the listener closes (new connections are refused at once) and
//     every open connection through it is closed. link-up listens again on the same port.
//   - limit-data and bandwidth count per connection and per direction, not per proxy.
//   - A proxy accepts a connection before it dials the upstream: when the upstream is dead (a killed
//     kas), clients see their connection accepted and then closed, not refused.
//   - A proxy's upstream is fixed. Agents that must re-home to another kas need a proxy per
//     (agent, kas) pair, named AgentName(id)+"/"+KasName(i), and a dialer that tries them in turn.
//   - Toxiproxy cannot cancel a change: when a context expires, Apply or Remove returns, but the
//     change may still complete later in the background.
//   - When a toxic closes a connection while more bytes are queued in front of it (reset-peer,
//     limit-data), toxiproxy can leave the goroutines of that connection blocked for the life of the
//     process. Tests that check for goroutine leaks should ignore LeakyFunctions.
package chaos
