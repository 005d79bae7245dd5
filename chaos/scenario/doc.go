// Package scenario loads chaos scenario files (scenarios/*.yaml): a topology, a load, a timeline of
// faults and the objectives the tunnel must meet. Loading is strict: an unknown key, a bad value or
// a fault the topology cannot have is an error naming the file, line, column and key.
//
// It only reads and checks files; it never starts anything (the harness runs scenarios).
//
// The schema, with every default (see the Default constants):
//
//	name: kas-kill                 # required: lower-case letters, digits and dashes
//	description: One of three ...  # optional
//	topology:
//	  kas: 3                       # kas instances (default 1)
//	  agents: 30                   # agents, ids 1..agents (default 1); agent id is homed on kas (id-1) mod kas
//	  tunnels_per_agent: 4         # idle tunnels each agent keeps (default 2)
//	  max_connection_age: 3s       # kas rotates agent connections at this age (default 0: never)
//	  find_timeout: 5s             # how long a call waits for a tunnel (default 20s)
//	  tracker: memory              # memory or redis (default memory)
//	load:
//	  shape: unary                 # unary, server-stream, client-stream, bidi, sleep (default unary)
//	  payload: 1KiB                # bytes per message (default 1KiB)
//	  rate: 300                    # calls per second, open loop; or
//	  workers: 16                  # closed-loop workers; exactly one of rate and workers
//	  duration: 40s                # required
//	  call_timeout: 10s            # per call (default 10s)
//	  entry: all                   # kas index where callers enter, or all: spread over live kas (default)
//	  targets: all                 # agents called: all, local (homed at the entry kas) or remote (default all)
//	faults:                        # optional; a timeline
//	  - at: 10s                    # required: from the start of the load
//	    for: 10s                   # optional: then the fault is removed (link faults without it last to the end)
//	    link: agent->kas           # a link fault: caller->kas, agent->kas, kas->kas, kas->redis ...
//	    type: latency              # ... of a type from chaos.FaultTypes()
//	    params: {latency: 100ms, jitter: 20ms}
//	    select: {fraction: 0.2}    # count, fraction, kas [0-based] or agents [ids, "1..5"]; default all
//	    deadline: 20s              # bound on applying and on removing it (default chaos.DefaultChangeDeadline)
//	  - at: 10s
//	    process: kill-kas          # a process fault, from chaos.ProcessTypes()
//	    select: {kas: 1}
//	expect:                        # required: at least one objective
//	  success_ratio: ">= 0.999"    # successful calls / calls
//	  latency_p50: "<= 20ms"       # also latency_p90, latency_p99
//	  routing_timeouts: "== 0"     # tunnel_routing_timeout_total, summed over kas
//	  recovery: "<= 15s"           # after each fault ends, until calls succeed again
//	  reconnect_rate: "<= 500"     # peak new agent connections per second (100 ms windows)
//	  max_failed: inflight_at_kill # failed calls: a number, or the calls in flight when a kas died
//	  zero_failed: true            # same as max_failed: 0
//	  unaffected:                  # success_ratio, latency_*, max_failed and zero_failed for calls to
//	    success_ratio: ">= 1"      # agents that no fault selected
//
// Objectives are an operator (<, <=, ==, >=, >) and a value; quote those that start with ">", which
// YAML would read as a folded block.
package scenario
