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
//	  recovery: "<= 15s"           # after each fault, until calls caught up again (below)
//	  reconnect_rate: "<= 500"     # peak new agent connections per second (100 ms windows)
//	  max_failed: inflight_at_kill # failed calls: a number, or the calls in flight when a kas died
//	  zero_failed: true            # same as max_failed: 0
//	  unaffected:                  # success_ratio, latency_*, max_failed and zero_failed for calls to
//	    success_ratio: ">= 1"      # agents that no fault selected
//
// Objectives are an operator (<, <=, ==, >=, >) and a value; quote those that start with ">", which
// YAML would read as a folded block.
//
// A scenario that bounds no failures (success_ratio, max_failed or zero_failed, in either scope)
// allows none: one failed call fails the run. One that bounds only unaffected calls lets the calls
// to the agents its faults select fail.
//
// Recovery, for each fault, is the time from when it ended (a fault that lasts to the end of the
// load: when it was in place; a kill or a restart: when it was done) until calls caught up again, on
// the run's timeline of whole seconds: a second has caught up when the calls that succeeded in it
// are at least 90% of the calls offered in it (less one call, for calls that cross a second's edge)
// and no call offered in it failed. Recovery runs to the start of the first second from which every
// second caught up, until the next fault starts or the load ends; a fault after which that never
// happened is "not recovered", and fails a recovery objective.
//
// Link fault types (link: and type:), with their params and an example value for each; direction
// is upstream, downstream or both (the default) for every type that takes it:
//
//	latency         {latency: 100ms, jitter: 20ms, direction: both}
//	                latency is required; jitter (default 0) is at most latency; each direction
//	                the fault applies to adds the latency, so with both a round trip grows by twice it
//	bandwidth       {rate: 500KB/s, direction: both}
//	                rate is required, a whole number of KB/s or MB/s, per connection and direction
//	blackhole       {close_after: 5s, direction: both}
//	                drops every byte; close_after (default 0: never) closes a connection that long
//	                after the black hole reached it; removing it closes the connections it held
//	limit-data      {bytes: 16KiB, direction: both}
//	                bytes is required: a connection closes once that many passed in a direction
//	link-down       {}
//	                the proxy stops listening and closes every connection; removing it listens again
//	reset-peer      {timeout: 0s, direction: both}
//	                resets a connection timeout (default 0) after the next bytes arrive
//	slow-close      {delay: 1s, direction: both}
//	                delay is required: a close reaches the other side that much later
//
// Process fault types (process:), with their params, what select picks and whether for undoes
// them:
//
//	kill-kas        {}
//	                select kas (required: kas, count or fraction; never every kas); no for
//	stop-kas        {}
//	                a graceful shutdown (calls in flight finish, agents are told to go); select and
//	                for as kill-kas
//	kill-agents     {}
//	                select agents (default every agent); with for, they start again at its end
//	restart-agents  {mode: rolling, interval: 1s}
//	                mode is together (default) or rolling; interval, rolling only and required
//	                there, is the pause between one agent's restart and the next; select agents;
//	                no for (a rolling restart must end within the load)
//	stop-redis      {}
//	                needs tracker: redis; no select; with for, Redis starts again (empty) at its end
//	start-redis     {}
//	                needs tracker: redis; no select; no for
package scenario
