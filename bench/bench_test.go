package bench

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/tunnelbench/tunnelbench/core/rpc"

	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/bench/load"
)

// The benchmarks below are for profiling one path with the Go tools, for example:
//
//	go test ./bench -run '^$' -bench 'Unary(Tunnel|Direct)$' -cpuprofile cpu.out -memprofile mem.out
//
// Ratios between them are what counts; the harness (tunnelbench bench) measures the same paths with
// real load.
//
// Profile notes, 2026-12, after tunnels started carrying call after call (2 cores): BenchmarkUnaryTunnel
// 59-83 µs and 229 allocations per call against 54 µs and 161 for BenchmarkUnaryDirect (it was about
// 230 µs and 345 allocations when each call opened its own tunnel stream; the in-process path now also
// passes through kas's gRPC metrics and message-size interceptors, as the public API does). Of the
// tunnel's CPU about 27% is read and write system calls: a call is eight tunnel messages (request_info,
// message, close_send and call_end one way; header, message, trailer and call_end the other), which
// gRPC's writer batches only when they queue up together. Allocation is about 10%; the per-call pieces
// left are the request pump's goroutine, the forwarding state, the call's context and span, and the
// envelopes. BenchmarkUnaryTunnelPublic (142 µs, 361 allocations) and BenchmarkUnaryTunnel2Hop (204
// µs, 541) add one whole gRPC server hop each: the public API's HTTP/2 stream in front of the tunnel,
// and for two hops the private-API stream kas opens per call plus the tunnel_ready / start_streaming
// round trip.
//
// Later the same month: the second hop now skips the find and the round trip (eager gateway streams:
// the call goes with the stream's opening to the replica where its agent was found last); make bench's
// 2hop case went from 4.35× to 3.6-3.9× direct, about half a direct call above the public API's.
// BenchmarkUnaryTunnelPublic's profile is 38% read and write system calls (27% the writers' flushes):
// each of a call's eight tunnel messages and the public hop's frames tends to leave in its own write,
// because gRPC's writer flushes whenever its queue runs dry. What is left to take is fewer, batched
// tunnel messages (request_info carrying the first message and the half-close, the answer's header,
// message, trailer and call_end in one), and several calls in flight on one tunnel for concurrency,
// where the peers that multiplex over one HTTP/2 connection lead (see results/peers). An idle agent
// keeps one tunnel by default now: 13 goroutines and about 99 KiB of heap and stacks for both ends, of
// which 9 goroutines belong to the connection (gRPC's reader, writer and keepalive on each side, the
// client's serializers) and 4 to the tunnel (a reader and a handler on each side).
//
// Writes per call, counted with strace -f -c over 10 000 calls (2026-12, later): direct 3.9, `tunnel`
// 2.1, the public API 7.4 at first. Of the public path's seven, two were gRPC's bandwidth-delay probe
// between caller and kas (kas's PING with the response, the caller's ACK): the public API now has fixed
// windows (1 MiB per call), as the tunnel and private API had; one was kas's call_end on its own, which
// kas now holds for up to a millisecond so that it shares the next call's write (tunnelwriter
// CallEndDelay). That leaves five: the caller's request, kas's ACK of the caller's own probe (direct
// pays that too), the request on the tunnel, the answer, the response; a direct call is three.
// HTTP GET through kas was 8.9 writes per request against 2.0 direct: the response header and body now
// travel as one tunnel message and leave kas in one write (7.7). Tried and not kept: gRPC stream
// workers on the public API (NumStreamWorkers: no gain measurable here). What is left on the public
// path is goroutine hand-offs (kas's stream handler, request pump and tunnel reader, the agent's reader
// and handler, where a direct call has the server's handler) and the public stream's 127 allocations. With 1
// MiB messages the tunnel's extra is two 1 MiB copies per call (gRPC's BufferSlice.Materialize when an
// envelope is decoded, on each receiving side); passing the received buffers through without making
// them contiguous would need envelopes decoded from, and payloads handed on as, mem.BufferSlice. An
// idle agent's 13 goroutines: 3 of grpc.ClientConn's callback serializers, each end's reader, writer
// and keepalive (6), the client stream's context watcher, the agent's tunnel reader, kas's Connect
// handler and tunnel reader; only the last pair is this project's to fold, and that needs a protocol
// message asking the agent to end the stream (kas cannot unblock a server stream's Recv otherwise):
// done since, see "Idle agents" below.
//
// Why the public API stays above 2.2× direct (2026-12, later still): at one caller every path is
// CPU-bound here. perf stat over 20 000 calls shows 1.1-1.2 CPUs busy on each, and CPU per call is about
// 85 µs direct, 111 µs `tunnel` and 200 µs over the public API: the public hop costs what a direct call
// costs (89 µs), since it is one (the caller's gRPC client and kas's gRPC server, as direct's client and
// server). So the public ratio is about one plus the tunnel's; with the tunnel at 1.27-1.38×, 2.2× needs
// the public path about 7% cheaper, and 1.8× would need the public hop cheaper than gRPC's own client
// and server. Of the public path's CPU, 31% is system calls: per call 10.2 reads (5.0 of them EAGAIN:
// gRPC 1.85's reader reads until the socket is empty), 5.4 writes, 7.3 epoll_pwait and 7.2 futex (thread
// wake-ups), by strace -f -c over 10 000 calls. Goroutine stack growth was 8.3% (the agent's handler
// goroutine unmarshalling the request, kas's stream handler and request pump, each starting on a small
// stack). Tried and not kept: running the agent's handlers and kas's pumps on goroutines kept for 2 s
// for the next call took stack growth to 3.7% of the CPU but moved neither BenchmarkUnaryTunnelPublic
// (180 → 187 µs) nor BenchmarkUnaryTunnelC64 (0.82-0.86 of direct → 0.76-0.82) beyond this machine's
// noise. go-grpc-middleware's server metrics cost about 3% (a WithLabelValues lookup per message).
// An idle agent's 43 KiB of heap (MemProfileRate 1, 1 000 agents) is mostly gRPC's: the ClientConn,
// both transports, hpack tables and the stream; this project's share is the agent's ServiceMux tables
// (2.1 KiB: demo, health and reflection, per agent), tunclient.New and its pool (2.4 KiB), the token
// credentials (0.35 KiB) and kas's tunnel (0.3 KiB).
//
// Batched tunnels (2026-12, the same day): a small call was eight tunnel messages, each a gRPC message
// of its own (encoding, framing, a wake-up of the reader on the other side). With batches the agent
// sends a call's whole answer as one message and kas a one-request call's start as one: two per call.
// BenchmarkUnaryTunnel went from 231 to 179 allocations per call (direct 161), make bench's 64 B calls/s
// at 64 callers from 0.61-0.62 of direct to 0.76-0.84, and 64 B p50 at one caller read 0.92, 1.44 and
// 1.15× in three runs (the first before kas read requests inline; spread over a run's rounds 12-61%);
// the public API stayed at 2.5-2.9× (its hop costs a direct call, see above). System calls per call did
// not change (strace: loopy already wrote a call's messages together); the gain is the per-message work
// on both sides. The first version encoded
// batches with protobuf, whose reflection for a repeated message in a oneof (reflect.NewAt per element)
// cost more than the messages saved: batches are encoded and decoded by hand (core/rpc/envelope.go).
// kas also reads a one-request call's request on the goroutine that attaches it (no pump goroutine).
//
// Idle agents (2026-12-02): kas now reads a tunnel on its Connect handler and ends it by asking the
// agent (rpc.EndTunnel), so an idle agent is 12 goroutines for both ends (was 13), and kas one per tunnel.
// The bytes barely moved (95 → 94-95 KiB): the handler's stack was 8 KiB already and stays 8 KiB. The
// stacks, read with delve (g.stack.hi - g.stack.lo and the depth down to g.sched.sp, after five GCs), 1
// agent: kas's handler 8 KiB (4.7 KiB deep: processRPC, the metrics interceptor's 0.8 KiB frame,
// Connect, Serve, readLoop, then gRPC's RecvMsg to its select, 1.6 KiB), the agent's tunnel reader 8 KiB
// (2.1 KiB deep, 1.2 KiB of it gRPC's RecvMsg down to waitOnHeader), kas's connection reader 8 KiB (1.5
// KiB deep), the client's reader, writer and two of the three serializers 4 KiB each, the other five 2
// KiB. The runtime shrinks a stack only while less than a quarter of it is in use counting 800 bytes of
// guard, so an 8 KiB stack needs under 1.2 KiB in use to halve: none of these can at gRPC's own depth,
// and ≤ 80 KiB for both ends would need gRPC's per-connection goroutines (keepalive, serializers) or
// its heap (ClientConn, transports, channelz socket, hpack tables: about 33 KiB) to shrink.
//
// The public path through an execution trace (2026-12-02; go test -trace over 3 000 calls, then each
// goroutine's running time and its wait between runnable and running, inside each call's wait for its
// answer; x/exp/trace): `tunnel` (caller inside kas) waits 89 µs per call with 62 µs of other
// goroutines running, direct 87 µs and 63 µs: level. The public API waits 193 µs with 140 µs running, so
// its hop costs about 1.2 direct calls in both. The writes are already as few as they can be: per call
// the caller's request (with its bandwidth probe's WINDOW_UPDATE and PING when gRPC's dynamic window is
// on, as it is for the harness's callers), kas's PING ack alone (a direct server answers so fast that
// the ack shares the response's write; kas's answer comes 100 µs later), the request batch to the agent,
// the agent's answer batch, and kas's response (header, message and trailers in one write, thanks to
// gRPC's writer yielding once before it flushes a small write). So the caller's reader wakes twice per
// call where a direct caller's wakes once, and kas's public writer runs two cycles. Tried and not kept:
// handing the rest of a batched answer to the caller's handler with the verdict, so that the response
// and the status leave together: they already did (5.1 writes and 10 reads per call either way, by
// strace). What is left is CPU: kas's public handler (gRPC's stream setup, three interceptors, routing,
// the request read, the verdict) runs about 31 µs per call in the trace, where a direct server's
// handler goroutine, the service's work included, runs 26 µs.
//
// What two gRPC hops cost without a tunnel (2026-12-02, second session): BenchmarkUnaryProxy puts a
// bare gRPC proxy (bench/grpcproxy: each call forwarded as bytes, a new stream to the server per call)
// in front of the direct server, and bench measures the same as the grpc-proxy reference beside the
// tunnel. Benchmarks in one go: direct 75-97 µs per call, tunnel-public 189-225, the bare proxy 217-226;
// two bench runs: p50 ×direct 3.11 and 3.55 for grpc-proxy against 2.45 and 2.68 for tunnel-public. The
// public path is already cheaper than plain proxying, because its second hop is a reused tunnel stream
// where a proxy opens a stream per call. Its CPU profile: syscalls 31%, kas's public handler with its
// interceptors, routing, request and verdict 9%, the scheduler looking for work 8-12%, allocation 10%.
// kas's public and private APIs now serve streams on reused goroutines (NumStreamWorkers): two
// alternating pairs of runs, public 2.61-2.62 against 2.76-2.92, 2hop 3.22-3.29 against 3.58-3.60.
//
// HTTP through the tunnel (same day): back-to-back GETs cost 70-100 µs of CPU directly and 400-730 µs
// through kas (getrusage over 4 000 requests): net/http's server side (kas's handler and the upstream)
// 20% of the profile, the agent's handler 12%, gRPC's writers 9%, the agent's http.Transport loops 15%,
// kas's in-process router 7%, stack growth of new goroutines 7%. A body-less request now reaches the
// agent as one batch (request_info, header, end, close_send: kas's HTTP handler says the request is whole,
// request.WithWholeRequest) and an answer with its whole body inline leaves as one (grpctool.HoldAnswer),
// two and three messages fewer each way; the latency floor (p10 200-210 µs) did not move above this VM's
// noise.
//
// An idle agent's 12 goroutines, both ends (goroutine profile of 500 idle agents): three gRPC callback
// serializers of the agent's ClientConn, the client transport's reader, writer and keepalive, the server
// transport's reader, writer and keepalive, the client stream's context watcher (gRPC starts one per
// streaming call), kas's Connect handler and the agent's tunnel reader. The heap's 42 KiB: 5.6 KiB of
// goroutine descriptors (runtime.malg), 2 KiB of the agent's ServiceMux, about 6 KiB of this project's
// in all, the rest gRPC's.
//
// 1 MiB calls (same day): a tunneled call allocated 7.4 MB where a direct one allocates 3.4: the
// in-process caller's request encoding, one copy on each receiving side (Materialize, for the envelope
// parsed in place), the two protobuf decodes, the service's payload and the agent's answer encoding.
// The CPU: memmove 26%, zeroing new memory 13%, madvise 7%, GC about 15%. The agent now encodes a large
// answer into a buffer of gRPC's pool that gRPC puts back once written (rpc.PooledMessage): 6.9 MB per
// call. Only about half come back: buffers over 1 MiB sit in a sync.Pool, which a collection empties, and
// at this allocation rate the GC runs about once per call. The next step is the two receiving copies into
// pooled buffers, released once decoded (protobuf's decode copies what it keeps, lazy fields included
// unless asked to alias, protobuf-go impl/lazy.go), with the release travelling with the message through
// the agent's request queue and kas's caller writer.
//
// The receiving copies pooled (2026-12-02, third session): a lone Message envelope of 16 KiB or more is
// now copied out of gRPC's buffers into a buffer of gRPC's pool (rpc/pooled.go) instead of a new slice,
// and the buffer travels with the payload to whoever reads it last: the agent's serverstream after the
// handler's decode, kas's in-process pipe after the caller's decode, gRPC after writing it to the public
// caller or the routing kas (a pooled mem.Buffer). Allocated per 1 MiB call, one benchmark run each
// (before → after): BenchmarkUnaryTunnel1MiB 6.9 → 4.5 MB, the public path 6.9 → 4.5, two hops 9.1 →
// 5.6, direct 3.4; ns per call in two alternating runs 6.7-7.4 → 5.3-6.2 ms (direct 4.5-4.8). A make
// bench subset (64 B and 1 MiB cases) read 1 MiB bytes/s 0.85 of direct at c1 and 0.92 at c16 (0.66-0.73
// and 0.76-0.83 in the four runs before), 64 B unchanged. What a tunneled 1 MiB call still allocates
// beyond direct's is the caller's request on kas: the in-process caller's encoding or the public API's
// receiving copy. Pooling those needs a reference count, because the request pump keeps the request to
// replay it on another tunnel until the agent accepted the call. A request payload is not pooled for an
// exposed upstream (agentk's --expose): gRPC lets its interceptors and stats handlers, which are not
// this project's, read a sent message after it was written.
//
// The second kas (2026-12-02, fourth session). A 64 B call through two kas was 466 allocations and about
// 280 µs of CPU (BenchmarkUnaryTunnel2Hop; the public path 306 and 227 µs, direct 161 and 89 µs), with
// 5.3 writes and 10.2 reads per call (strace -f -c, 10 000 calls): the gateway kas sent tunnel_ready on
// its own as it took the call, then the agent's header, message and trailer as a gRPC message each. On an
// eager stream of the second version (rpc.GatewayEagerV2) the gateway now sends tunnel_ready with the
// answer when it read the whole request at once (a method the agent's tunnel says takes one request):
// 4.1 writes and 8.1 reads per call. And what the agent sent as one batch goes on as one GatewayBatch:
// one gRPC message kas → kas per small call instead of four. A kas or agent without an OTLP endpoint
// now starts no span at all (tracing.Off): a no-op span still cost a context, its options and a trace
// context parse per step, 12 allocations per call on every path. Allocations per call: `tunnel` 179 →
// 167 (direct 161), the public path 306 → 294, two hops 466 → 421. CPU per call did not separate from
// this machine's noise in alternating runs (2hop 211-414 µs per call over runs of the same binary). The
// second hop still opens a gRPC stream per call (the routing kas's client stream with its context
// watcher goroutine, the gateway's server stream and its interceptors): what is left to take there is a
// reusable kas → kas stream that carries call after call, as tunnels do. Tried and not kept: the agent
// reading a body-less HTTP request's end before it calls the upstream, without the goroutine and pipe
// for the body (5 allocations fewer per request, CPU per request not separable from noise).
//
// Hop streams (2026-12-02, fifth session): that reusable stream. Eager calls to a gateway that
// announces it (kas-hop-gateway-reuse) ride /tunnelbench.rpc.v1.KasHop/Calls streams kept open, one
// call at a time: a HopStart with the method, metadata and deadline, the caller's frames, close_send;
// the gateway's answer as on an eager stream, then call_end (see gateway.proto). Per call the second hop
// no longer opens a gRPC stream (headers and hpack both ways, the private API's interceptors and
// credentials check, the client's context-watcher goroutine, a server handler, the end-of-stream
// trailers); a long-lived reader on each side hands messages to the call. The gateway also takes a
// found tunnel without starting the unserved watch (a goroutine, a cancel context and the Unimplemented
// status formatted per call, for a tunnel it already has). BenchmarkUnaryTunnel2Hop: 421 → 349
// allocations per call; three alternating runs of the two binaries, 243, 409 and 296 µs per call
// before, 186, 193 and 188 after (direct 76-102). A bench subset (unary-64B, c1, two runs): tunnel-2hop
// 2.23 and 2.36× direct, below the public API's 2.52 and 2.69 (its caller is inside the routing kas),
// where per-call streams read 3.09-3.41× in make bench. A cancelled call ends its hop stream rather than
// wait for the gateway to confirm it: cancellations are rare, and a new stream is cheap next to a
// drain protocol.
//
// HTTP and idle stacks again (2026-12-02, sixth session). The benchmarks now report goroutines started
// per op (runtime/metrics): 1 per call direct, through the tunnel and over the public API (the agent's
// handler; kas's public API serves on reused workers), 2 through a second kas, and 5 per HTTP GET through
// kas against 1 direct (kas's in-process stream, net/http's background read on kas and on the upstream,
// the agent's handler and its request-body reader). BenchmarkHTTPGetTunnel is about 5.9× direct back to
// back (320 against 54 µs; 372 CPU µs per request, 26% in system calls, 18% under protobuf with its
// allocation: mostly decoding the header maps of the HTTP messages and the envelopes' metadata, which go
// through reflection), and 3.2-3.7× at make bench's 500
// req/s, where each request starts on an idle machine and crosses six sockets against two. The agent
// accepted every request with an empty header before its answer, so that kas stops keeping the body for a
// replay; a body-less request keeps nothing, and now its answer accepts it: 7.9 -> 6.6 writes and 16.2
// -> 14.5 reads per GET (strace -f -c over 5 000), 520 -> 508 allocations; p50 in three alternating
// bench runs 3.00, 3.07, 2.13 before and 2.81, 2.64, 2.54 after. Idle stacks, read per goroutine this
// time from runtime.allgs (a test built with -checklinkname=0, 200 agents after two more GCs): the
// agent's tunnel reader 8 KiB with 2.3 KiB in use, kas's Connect handler 8 KiB with 5.0 KiB in use,
// kas's connection reader 4 KiB with 1.5 KiB, the client's reader, writer and keepalive and the three
// serializers 2 or 4 KiB each with 0.4-0.9 KiB in use. A stack halves at a GC only while its use plus
// 800 bytes of guard is under a quarter of it, so none of the 4 KiB ones with 0.4 KiB in use can go
// back to 2 KiB, and GODEBUG=adaptivestackstart=0 moved the total by 2 KiB of 56. The idle must (80 KiB)
// stays out of reach while both ends run gRPC-go's 11 goroutines per connection and stream.
//
// Protobuf without reflection, and the idle floor (2026-12-02, seventh session). Of BenchmarkHTTPGetTunnel's
// CPU about 13% was protobuf (decode 6%, encode and size 6%), most of it the reflection over maps: each
// map<string, Values> or header map entry cost a reflect.New and a reflect map insert to decode and a
// copied key (reflect.MapIter.Key) to encode. Every tunnel, hop and HTTP-tunnel message is now encoded by
// vtprotobuf's generated code (gRPC 1.85 already requires the module), and what only kas sends
// (ConnectResponse, HTTPRequest, HopRequest, GatewayResponse) is decoded by it; what an agent sends keeps
// protobuf's decoder, which also checks UTF-8 and field numbers inside map entries
// (grpctool/fastproto.go; FuzzProtoFastPath checks the two against each other). Protobuf's share of
// the HTTP profile went to about 6% (2.2% of it the agent's HTTPResponse, decoded by protobuf), 508 -> 485
// allocations per GET, 349 -> 340 per call through two kas; a 64 B call's RequestInfo and envelopes were
// already cheap (167 and 294 allocations unchanged). The idle agent's 52 KiB of stacks by goroutine (each
// one's start function read from runtime.allgs, 200 agents): the agent's pool goroutine and kas's Connect
// handler 8 KiB each (2.2 and 4.8 KiB in use), the client transport's reader, writer and keepalive and
// the server transport's three 4 KiB each, two of the ClientConn's three serializers 4 KiB and the third
// 2 KiB, the stream's context watcher 2 KiB. Tried and not kept: opening the tunnel on a short-lived
// goroutine keeps the pool goroutine at 4 KiB (52 -> 48-51 KiB of stacks per idle agent), but only until
// the tunnel carries a call: then it grows to 8 KiB (3.0 KiB in use when idle again), so it would flatter
// a never-used agent only. Measured instead of built: agents whose tunnel is a plain HTTP/2 stream of
// golang.org/x/net/http2 (gRPC's wire format, the same kas) cost 45.1 KiB of heap and 31.5 KiB of stacks,
// 7 goroutines, for both ends: 76.6 KiB against 93-95 with gRPC-go's client, whose ClientConn brings
// three serializers, a keepalive goroutine and a stream watcher that x/net/http2 does without (its
// keepalive is a timer). The gRPC-based peers cost the same as this project (39-40 KiB of heap, 52-55 KiB
// of stacks, 12 goroutines: results/peers). HTTP in make bench (3.15-3.69×) against subsets (2.2-2.7×):
// the HTTP case runs after the c64 cases, which leave the agent about 70 idle tunnels; four alternating
// subset runs with and without a c64 case before it read 2.20 and 2.70× without, 2.49 and 2.55× with:
// not separable from this VM's noise.
//
// The agent's own HTTP/2 client (2026-12-03, ninth session). The x/net/http2 client measured above was
// built first (85 KiB, 7 goroutines: heap 53 KiB, because its request-body writer holds a 16 KiB scratch
// buffer per stream while it waits, and the connection 8 KiB of bufio buffers; 1 MiB calls 10-15% below
// gRPC-go's client, from its body writer's extra hand-off and copy). core/tunclient/h2conn is instead a
// client of its own on x/net's framer and HPACK: one reader goroutine per connection, frames written by
// the stream's caller, keepalive on a timer. An idle agent with its kas end: 23.3 KiB of heap, 30.1 KiB
// of stacks, 6 goroutines (idle-cost, 1000 agents), from 93.8 KiB and 12. Throughput needed three things
// (BenchmarkUnaryTunnel1MiB and alternating bench subsets against the gRPC-go client): a first version
// that wrote each frame with its own system call and woke the reader per frame read 1 MiB c16 at 0.69
// of direct against 0.80-0.86; batching a stream's frames (256 KiB per write, writev from the caller's
// buffers), queueing small frames behind a write under way (frames of many streams share a system call),
// waking a reader once its whole message is queued, and reading sockets into a 32 KiB buffer that is
// pooled between reads (two syscalls per 16 KiB frame became one) brought 1 MiB c16 to 0.80-0.89
// (gRPC-go's client 0.79 in the same runs). 64 B at c64 was then 0.78-0.84 against 0.93-1.04: the
// profile showed 8% of CPU in write system calls against 3% with gRPC-go's client, whose writer
// goroutine finds many streams' frames queued when it runs, where here the first writer wrote at once,
// alone. A writer now yields the processor once (runtime.Gosched) before it writes, so that goroutines
// ready to run queue their frames into its write: 0.91-0.94, level with gRPC-go's client (0.92-0.94 in
// the same runs), and BenchmarkUnaryTunnelC64 28.9-31.3 µs per call against 30.4-31.6; alone, the yield
// returns at once (64 B c1 unchanged). 1 MiB at c64 stays a little lower (0.61-0.71 against 0.79-0.82
// in those runs; no figure to reach there).
//
// Large messages on the agent's client again (2026-12-03, tenth session). One binary, the bench
// topology's agents switched between h2conn and gRPC-go's client by a throw-away switch, `bench
// --shapes unary-1MiB --concurrency 16,64`, four alternating pairs: 1 MiB bytes/s ×direct 0.78-0.84
// (h2conn) against 0.80-0.90 at c16, 0.66-0.71 against 0.73-0.84 at c64. The ninth session's subsets
// had called c16 level. CPU profiles of BenchmarkUnaryTunnel1MiBC16 on both are alike (a third in
// memmove, a third in system calls), and h2conn makes fewer writes per call (39 writes and writevs
// against 65, reads level), so the gap is in when goroutines run, not in work done. Two things found on
// the way and mended: h2conn allocated 489 objects per 1 MiB call against gRPC-go's 243 (a DATA frame
// struct per frame read, a closure per socket read, a header slice per frame written; now 267, and a
// 64 B call 168 instead of 172), and a large write's end woke every writer waiting for the connection,
// which all ran to find it taken again (now the longest waiting one is woken, and its end wakes the
// next): 3 more alternating pairs read 0.77-0.89 at c16 and 0.66-0.77 at c64 against 0.78-0.80 and
// 0.63-0.74 before, within the noise.
//
// The public path's wake-ups (2026-12-03, tenth session; strace -f -c over 20 000 calls of each
// benchmark, per call): direct 4.0 writes, 4.0 reads, 0.16 futex calls; `tunnel` 2.0 writes, 4.0 reads,
// 3.4 futex; `tunnel-public` 5.0 writes, 10.0 reads, 7.0 futex, 1.3 nanosleep and 0.8 sched_yield.
// The writes are those listed above (the caller's request, kas's PING ack, the batch to the agent, its
// answer, kas's response). The futex calls are the difference: each is a goroutine made runnable while
// the other processor sleeps (the runtime wakes a thread for it), and the nanosleeps are that thread's
// 3 µs waits to steal the goroutine just readied. A direct call hands off four times (caller, client
// writer, server reader and handler, client reader) and at c1 its two processors rarely sleep between
// them; the public path hands off about nine times (kas's public reader to its worker, the worker to the
// tunnel's writer, the Connect stream's reader to its handler, the handler to the public writer with the
// answer and to the waiting call with the verdict, the call to the public writer with the status, and
// the agent's reader to its handler, besides the caller's own), most across processors. kas's own code
// adds none of these but the verdict (the Connect handler already writes the answer to the caller's
// stream itself, and gRPC-go writes a status only when the call's handler returns); the rest are
// gRPC-go's readers and writer goroutines. Fewer of them needs kas's servers on a transport of their own
// that writes on the sender's goroutine, as h2conn does for agents: that is where the public must (≤2.2)
// would be found; its runs read 1.63-2.60 today.
//
// Eleventh session (2026-12-03). Large messages on h2conn: a received message was copied twice on
// the agent, into one contiguous buffer (h2conn) and then into the payload's pooled buffer (the tunnel
// codec), where gRPC-go's client hands the codec its frames' buffers. h2conn now does the same for
// messages of 16 KiB or more (readBuffers: frames handed over whole, copied only where the message
// begins or ends inside one). BenchmarkUnaryTunnel1MiBC16's memmove went from 3.51 to 3.14 s per 3 000
// calls (the copy in h2conn's read, 0.34 s, is gone; the codec's copy from many buffers takes 0.18 s
// more), 10 more allocations per call (buffer objects). Four alternating bench pairs (old, new): 1 MiB
// c64 0.72/0.80, 0.66/0.73, 0.71/0.83, 0.71/0.78 of direct; c16 0.90-0.95 against 0.88-0.93; c1 over
// eight pairs 0.74-0.87 against 0.71-0.86 (medians 0.83 and 0.79: within the noise, no overlapped copy
// was lost, as a message is read whole either way with a 4 MiB window). What 1 MiB c16 still pays over
// direct (CPU 10.4 against 9.3 s per 3 000 calls): memclr +0.29 s and madvise +0.11 s, from the 1.2 MB
// per call the tunnel allocates beyond direct (the in-process caller's request encoding, kept by the
// request pump for a replay; pooling it needs a reference count shared by the pump and gRPC's write,
// since a buffer put back early would carry one caller's bytes into another's call), and memmove +0.36
// s (the receiving copies). TLS: an idle agent over TLS cost 65.7-69.8 KiB of heap for both ends against
// 23.6 over plaintext: gRPC-go's server reads a connection that is not a socket (tls.Conn) through a
// 32 KiB bufio.Reader kept for the connection's life (its pooled, non-pinning reader needs a raw
// socket), and h2conn through a 4 KiB one, both in front of crypto/tls, which keeps a whole record
// itself. kas's listeners now set ReadBufferSize(0) with TLS and h2conn reads a *tls.Conn as it is: 33.6
// KiB (TestIdleCostOverTLS), calls over TLS level in three alternating benchmark pairs (64 B 60-66 µs
// against 65-74, 1 MiB 3.7-4.1 ms against 3.8-3.9). The public path once more: the binaries of a333e59
// (agents on gRPC-go's client) and 1ac66f0 (h2conn), three alternating pairs of `bench --shapes
// unary-64B --concurrency 1 --rounds 6`: `tunnel` p50 50-58 against 46-65 µs, `tunnel-public` 117-118
// against 111-124, direct 47-50 against 42-57. Replacing one end's transport (the hand-off to gRPC's
// writer goroutine and its keepalive and serializer goroutines gone) moved neither beyond the noise, so
// a transport of kas's own on the public side would not by itself take the public path from about 2.4
// to 2.2: its two hops are each a whole gRPC call over a socket (≈ 1 + 1.1 direct calls), which leaves
// kas's routing, verdict and PING ack 0.1 of a direct call (about 5 µs) in all. Idle stacks: the
// agent's pool goroutine waited for the next call inside Recv (2.2 KiB deep, 3.0 after a call), and the
// runtime halves a stack at a collection only while its use plus 800 bytes of guard is under a quarter
// of it, so it kept 8 KiB. It now waits before Recv (rpc.AwaitReceived, through the batch and end
// wrappers to h2conn), about 1 KiB deep, and is halved to 4 KiB: idle stacks both ends 29.5-30.2 ->
// 25.8-27.2 KiB in three bench runs each (49.1-50.6 KiB in all). 64 B c1 `tunnel` read 1.05-1.18× over
// seven alternating bench pairs against 1.02-1.14 (medians 1.16 and 1.10), BenchmarkUnaryTunnel 78-105
// against 75-94 µs in five pairs (medians 81 and 84): no cost separable from the noise.
//
// Twelfth session (2026-12-03). Large requests: a caller inside kas had its request encoded into a new
// slice by the in-process connection (1 MiB per call), kept by the request pump for a replay, where
// gRPC-go's client encodes into a pooled buffer that it puts back once written. A throw-away ring of
// reused buffers in its place took BenchmarkUnaryTunnel1MiBC16 from 1.81-1.92 to 1.55-1.65 ms per call
// (direct 1.61-1.74): the garbage of those slices, not their copy, was what 1 MiB paid over direct
// (more collections for everything else in flight). The request is now encoded into a buffer of gRPC's
// pool counted by references (request.Frame.Buf): the replay log holds one, every write to a tunnel,
// gateway or hop stream takes one of its own (gRPC frees it once written), and the buffer goes back when
// the last lets go. BenchmarkUnaryTunnel1MiBC16 4.44 -> 3.33 MB per call (direct 3.25), 1.78-1.82 ->
// 1.67-1.75 ms; BenchmarkUnaryTunnel1MiB 4.54 -> 3.38 MB, 4.05 -> 3.43 ms (direct 3.32-3.41). Three
// alternating `bench --shapes unary-1MiB --concurrency 1,16,64` pairs: 1 MiB bytes/s ×direct 0.99-1.01
// at c1, 1.01-1.03 at c16 and 0.91-0.93 at c64, against 0.80-0.84, 0.90-0.94 and 0.79-0.82 before. A
// large request through the public or private API was copied out of gRPC's buffers into a new slice
// (RawCodec's Materialize); the pump now asks for it shared (RawFrame.KeepShared): gRPC's own buffer
// when it came in one, a pooled copy otherwise. Public API 1 MiB 0.54-0.55 -> 0.64 at c1, 0.60-0.63 ->
// 0.68-0.69 at c16 in two alternating pairs. The second kas of a two-hop call reads its hop stream
// itself and hands the pump each message: a large one now goes on as a slice of the received buffer
// with a reference of its own (gateway.hopMessage), 1 MiB two-hop 0.59-0.63 -> 0.68-0.70 at c1 and
// 0.57-0.60 -> 0.65-0.67 at c16 in two more pairs. The public path at 64 B once more: holding the agent's
// answer for the call's own goroutine to send with its status, instead of the Connect handler's
// sending it at once, read 163-169 against 166-174 µs per call in three alternating benchmark pairs,
// within the noise, and was dropped. HTTP: reading a body-less request's end on the agent's handler
// instead of a goroutine of its own (one of the five a request starts) read 2.94-3.15× against
// 3.03-3.49× in three alternating pairs, within the noise (direct's own p50 moved from 83 to 122 µs), and
// was dropped too. Counted with strace over 10 000 requests back to back, a request through the tunnel
// makes 6.4 writes and 14.2 reads (7.8 of them finding nothing) and 10 futex wake-ups where a direct one
// makes 2.1, 5.1 and 2.1: its six socket crossings against two are the floor that HTTP's ratio at 500
// req/s (about 3× in these runs) sits on.
//
// Thirteenth session (2026-12-03). Where an HTTP request's time goes at 500 req/s: a throw-away build
// stamped each step of a request with time.Since(kas's ServeHTTP entry) (the whole topology is one
// process) over 4 500 requests. Medians: kas has sent the whole request into the tunnel at 11 µs; the
// agent's HTTP/2 reader has it at 63 µs (52 µs for the kas -> agent crossing: gRPC-go's loopy writer woken,
// the write, the agent's reader woken by the poller), the pool goroutine at 70, the Exchange handler at
// 83; the upstream's handler runs at 130 (40 µs for net/http's transport and the upstream's server); the
// agent has the upstream's answer at 153 and has sent it at 166; kas has it at 208 (42 µs for the agent ->
// kas crossing) and has written it to the client at 219. The client saw 294 µs, so its own two crossings
// took about 75. Every crossing of a connection costs 40-50 µs at this rate: the machine idles between
// requests and each crossing wakes a sleeping thread (at 2 000 req/s the tunnel is CPU-bound instead: 526
// against 91 µs, 486 allocations and 212 µs per request back to back against 67 and 40). So the run now
// measures the crossings by themselves: the http-proxy reference (bench/httpproxy), the upstream behind
// two plain reverse proxies, as many connections as the tunnel crosses. Three runs: direct 81-121 µs,
// http-proxy 236-287 µs (2.26-2.91x), http-tunnel 286-345 µs (2.77-3.53x): the tunnel costs 1.1-1.3x
// two plain proxies, and HTTP's 3x must sits just above what the crossings alone cost on this VM.
//
// Fourteenth session (2026-12-03). Medium messages. The committed runs had read unary 1 KiB at one caller
// at 1.33-1.65x direct in all of the last twelve, where 64 B read 1.05-1.12x: unnoticed, since no figure
// asks for it. `bench --shapes unary-256B,unary-1KiB,unary-4KiB,unary-16KiB --paths direct,tunnel`: 256 B
// 1.12-1.14x, 1 KiB 1.43-1.60x, 4 KiB 1.88-2.29x, 16 KiB 1.04-1.14x. Syscalls per call were the same for
// 64 B and 4 KiB (strace: 2 writes, 4 reads, about 4 futex); the cause was garbage: a 4 KiB call made
// 40.9 KB per call (BenchmarkUnaryTunnel4KiB; direct 22.6), four new slices of a payload each that gRPC-go
// keeps in its pooled buffers: each end's received batch (RawCodec materialized it, and the payload was a
// slice of it), the agent's answer encoding and kas's in-process request encoding (both pooled only past
// 16 KiB, as large payloads travel alone and batches had no room for a pooled buffer). With GOGC=800 the
// 4 KiB ratio read 1.37x against 1.98x at 100. Now every payload from 1 KiB on (grpctool.MediumMin) is
// pooled: a received batch of 1 KiB or more is decoded out of gRPC's buffer (a pooled copy when it came
// in several, which goes back at once), each payload it carries copied into a pooled buffer of its own that the unbatcher hands out with its
// message (as a large lone one was); the agent's answer goes into a pooled buffer that joins the batch
// (RequestBatcher.SendPooled, freed once copied into the batch or written); kas's pump keeps a request in
// a buffer counted by references, which a tunnel holds with a reference of its own (Writer.HoldShared,
// rpc.SharedResponseBatch) so that it still leaves in one batch with request_info and close_send.
// BenchmarkUnaryTunnel4KiB: 40.9 -> 26.7 (the receiving and answering ends) -> 21.9 KB per call (direct
// 22.6), 137-156 -> 118-132 -> 110-120 us per call in alternating runs (direct 83). Two alternating
// pairs of `bench --shapes unary-1KiB,unary-4KiB,unary-16KiB --concurrency 1 --paths direct,tunnel
// --rounds 6`: the tunnel's 4 KiB p50 139-145 -> 96-97 us (direct 53-77 in all four), 1 KiB 76-77 ->
// 73-77 us. Still above 64 B's ratio: with GOGC=400 the 4 KiB ratio reads 1.29-1.35x against 1.49-1.76x
// at 100, while the tunnel's garbage per call is now direct's; a collection costs the tunnel's c1 path
// more than direct's, since its hand-offs between goroutines need the processor that the collector's
// worker takes. A 64 B call is unchanged (168 allocations, a batch under 1 KiB takes the old path).
//
// Fifteenth session (2026-12-03). The public API's lone PING ACK. kas's public API has fixed windows, so
// kas sends no bandwidth probe of its own, but a caller's gRPC-go client on default windows does: a PING
// with nearly every call's answer (4 898 of 5 000 calls of BenchmarkUnaryTunnelPublic). gRPC-go's server
// writes the ACK at once; a direct server's answer follows within microseconds and shares that write,
// kas's 100 us later, so the ACK left alone and the caller's reader woke twice per call. kas's public
// listener (plaintext) and credentials (TLS) now hold a lone ACK for up to 1 ms, for the connection's
// next write, which sends both with one writev (core/grpctool/pingack). Keeping gRPC's pooled read needed
// ReadOnReady on the wrapped socket (gRPC looks for it; without it a wrapped socket is read through a 32
// KiB buffer kept for the connection's life). strace per call: public 4 writes (one a writev) and 8 reads
// against 5 and 10 (direct 4 and 4). BenchmarkUnaryTunnelPublic 154-158 against 158-178 us in three
// alternating pairs. Six alternating pairs of `bench --shapes unary-64B --concurrency 1 --paths
// direct,tunnel,tunnel-public,tunnel-2hop --tunnels tunnel,grpc-proxy` (each binary first in three):
// public x direct 1.75, 2.32, 1.87, 2.21, 2.13, 1.81 against 2.00, 2.70, 2.39, 2.55, 2.10, 2.43 (p50
// 96-125 against 114-170 us); public 1 MiB bytes/s x direct 0.67-0.70 against 0.63-0.69 at c1 and c16.
// The thread wake-ups left (perf record -g -e syscalls:sys_enter_futex over 5 000 calls; FUTEX_WAKE per
// call, public against direct): 1.16 against 0.36 in all; gRPC's control buffer waking a writer goroutine
// 0.36 against 0.19; a yield (runtime.Gosched, in gRPC's writers and h2conn's) waking an idle processor
// 0.24 against 0.08; gRPC's receive buffer waking a stream's reader 0.12; the caller's client woken by the
// answer's headers 0.11 against 0.01; h2conn's reader waking the agent's tunnel 0.10; the agent's handler
// goroutine started 0.09. All but the last two are gRPC-go's own goroutines. Tried and not kept: h2conn
// yielding only while its connection has writers at once (a lone writer writing at once, without waking
// an idle processor): BenchmarkUnaryTunnel 91-95 against 79-89 us in three alternating pairs, the public
// path level. Writes per HTTP request back to back (perf, sys_enter_write): six, one per socket crossing
// (the two HTTP clients, kas's and the upstream's HTTP servers, kas's gRPC writer, h2conn): none alone.
// The second kas of a two-hop call batched the agent's medium answer payload by its slice and left the
// pooled buffer it came in to the garbage collector, so the pool made a new one per call: the gateway's
// batcher now keeps it pooled (GatewayBatcher.SendPooled), back once copied into the batch or written.
// BenchmarkUnaryTunnel2Hop4KiB 47.3 -> 31.0 KB and 343 -> 345 allocations per call, 209-215 -> 194-206 us
// in three alternating pairs; BenchmarkUnaryTunnel2Hop (64 B) unchanged (341 allocations).
// The agent's handler on the tunnel's own goroutine, the lead the last notes left: a throw-away build ran
// a unary handler inline once its whole request was in (no handler goroutine, no reading of kas's side
// during the call, so a cancellation would go unseen: an upper bound, not a design). BenchmarkUnaryTunnel
// 78-82 against 82-84 us in four alternating pairs, 165 against 168 allocations; the public path within
// the noise. Not built: a few microseconds at most, for a change to the protocol's end-of-call handling.
//
// Sixteenth session (2026-12-03). Where an HTTP request's time goes at 500 req/s, from runtime/trace
// (goroutine transitions per request, 1 500-2 000 requests): most requests run start to end on one
// thread, each hand-off to a goroutine on the same processor and each socket read found ready by the
// same thread, so the latency is the CPU of the path and not waits: requests that stayed on one thread
// took a median of 455 us through the tunnel, 355 through the http-proxy reference and 180 direct, and
// had 22-32 us with nothing running. What the tunnel runs that two plain proxies do not, per request on
// one thread: kas's stream handler (routing and the tunnel's send) 36-59 us, kas's tunnel reader 17-23,
// the agent's tunnel goroutine 16-19 and h2conn's reader 10-15, kas's gRPC reader and writer 8-10 each.
// Back to back (BenchmarkHTTPGetTunnel, CPU profile) the tunnel and the reference cost the same (268
// against 270 us per request), yet at 500 req/s the reference was 20-30% faster: the tunnel runs much
// more distinct code (gRPC, protobuf, h2conn, routing, net/http) where the reference runs net/http's
// three times, and at this rate the caches are cold between requests. The profile's one finding was
// goroutine stack growth: 5% of the CPU (11.5 us per request), in the three goroutines started per
// request (kas's in-process stream handler 5.5 us, the agent's call handler 4.5 us, its body reader 1
// us), each starting small and copying its stack on the way to 8-16 KiB. They now run on goroutines
// kept for 50 ms after their last work, one pool per owner (core/workers); a pool shared by the whole
// process was tried first and hung a synctest bubble (a bubble's goroutine waiting on a channel from
// outside it is never durably blocked). BenchmarkHTTPGetTunnel 265-319 -> 251-292 us in four alternating
// pairs, 5 -> 2 goroutines started per request (the two left are net/http's own, one per server, as
// direct has one); BenchmarkUnaryTunnel and BenchmarkUnaryTunnelPublic 1.00 -> 0.00 goroutines per call
// (the agent's handler), their time within the noise; BenchmarkUnaryTunnel2Hop keeps one (the first
// kas's request pump, a goroutine per call that runs in synctest bubbles in its tests, left as it is).
// Six alternating runs of 500 req/s (4 s each, direct and tunnel in turns): tunnel p50 379-457 against
// 329-579 us, x direct 2.71-3.20 against 2.94-3.53 (one more at 3.91 with direct at 97 us); two
// alternating pairs of the bench command's HTTP group: 2.96 and 3.26 against 3.40 and 3.88, the tunnel
// 1.19-1.30 against 1.37-1.41 times the http-proxy reference beside it. The header
// conversions copied each header twice on each side (a clone to drop the hop-by-hop fields, then the
// conversion): they now convert once, sharing the value slices: 492 -> 474 allocations and 36.4 -> 34.5
// KB per request, time within the noise. Left: kas decodes the agent's HTTP answer with protobuf's
// reflection (4 us per request back to back; on purpose, see grpctool.FastDecoder); per message, the
// gRPC middleware's Prometheus counters hash their labels (about 1 us each); the routing histograms
// (two, 3 us per call at 500 req/s).
//
// Earlier notes (2026-11, single-use tunnels): about 15% system calls, 15% allocation and 4% GC, 6%
// goroutine stack growth, 5% protobuf envelopes, the rest gRPC's per-call stream on the tunnel. With 1
// MiB messages the tunnel's extra cost is one more copy of the payload on each receiving side (gRPC
// frees its buffers when a message is decoded) and the garbage of those copies; reuse does not change it.

// goroutinesCreated is how many goroutines the process has started so far (runtime/metrics); ok is false
// on a runtime without that metric.
func goroutinesCreated() (n uint64, ok bool) {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}

// countGoroutines reports the goroutines started per op from now to when the returned func is called (at
// the end of the timed loop): a hand-off to a new goroutine is a wake-up on the call's path. Without the
// metric it reports nothing rather than a zero that would read as a measurement.
func countGoroutines(b *testing.B) func() {
	start, ok := goroutinesCreated()
	if !ok {
		return func() {}
	}
	return func() {
		end, _ := goroutinesCreated()
		b.ReportMetric(float64(end-start)/float64(b.N), "goroutines/op")
	}
}

func benchUnary(b *testing.B, path Path, size int) {
	cfg := TopologyConfig{}
	if path == PathTunnel2Hop {
		cfg.Kas = 2
	}
	topo, err := StartTopology(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Close(context.Background())
	conn, err := topo.PathConn(path)
	if err != nil {
		b.Fatal(err)
	}
	md := metadata.Pairs(rpc.RoutingAgentIDMetadataKey, "1")
	call := load.NewShapeCall(load.ShapeUnary, size, conn, func(ctx context.Context) context.Context { return metadata.NewOutgoingContext(ctx, md) })()
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(2 * int64(size))
	b.ResetTimer()
	defer countGoroutines(b)()
	for range b.N {
		if _, err := call(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnaryDirect is the baseline: the demo service called directly, 64 B each way.
func BenchmarkUnaryDirect(b *testing.B) { benchUnary(b, PathDirect, 64) }

// BenchmarkUnaryTunnel is the same call through the tunnel, the caller inside kas.
func BenchmarkUnaryTunnel(b *testing.B) { benchUnary(b, PathTunnel, 64) }

// BenchmarkUnaryTunnelPublic is the same call through kas's public API over loopback TCP.
func BenchmarkUnaryTunnelPublic(b *testing.B) { benchUnary(b, PathTunnelPublic, 64) }

// BenchmarkUnaryTunnel2Hop is the same call entering at a kas that holds no tunnel of the agent.
func BenchmarkUnaryTunnel2Hop(b *testing.B) { benchUnary(b, PathTunnel2Hop, 64) }

// BenchmarkUnaryDirect1MiB is BenchmarkUnaryDirect with 1 MiB each way.
func BenchmarkUnaryDirect1MiB(b *testing.B) { benchUnary(b, PathDirect, 1<<20) }

// BenchmarkUnaryTunnel1MiB is BenchmarkUnaryTunnel with 1 MiB each way.
func BenchmarkUnaryTunnel1MiB(b *testing.B) { benchUnary(b, PathTunnel, 1<<20) }

// benchUnaryC64 makes the 64 B call from 64 goroutines at once, like the bench's concurrency-64 case.
func benchUnaryC64(b *testing.B, path Path) { benchUnaryParallel(b, path, 64, 64) }

// benchUnaryParallel is benchUnary from callers goroutines.
func benchUnaryParallel(b *testing.B, path Path, size, callers int) {
	topo, err := StartTopology(context.Background(), TopologyConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Close(context.Background())
	conn, err := topo.PathConn(path)
	if err != nil {
		b.Fatal(err)
	}
	md := metadata.Pairs(rpc.RoutingAgentIDMetadataKey, "1")
	b.ReportAllocs()
	b.SetBytes(2 * int64(size))
	b.SetParallelism(max(1, callers/max(1, runtime.GOMAXPROCS(0))))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		call := load.NewShapeCall(load.ShapeUnary, size, conn, func(ctx context.Context) context.Context { return metadata.NewOutgoingContext(ctx, md) })()
		for pb.Next() {
			if _, err := call(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkUnaryDirectC64 is BenchmarkUnaryDirect from 64 goroutines: the time per op is the inverse
// of the throughput.
func BenchmarkUnaryDirectC64(b *testing.B) { benchUnaryC64(b, PathDirect) }

// BenchmarkUnaryTunnelC64 is BenchmarkUnaryTunnel from 64 goroutines.
func BenchmarkUnaryTunnelC64(b *testing.B) { benchUnaryC64(b, PathTunnel) }

// BenchmarkUnaryDirect1MiBC16 is BenchmarkUnaryDirect1MiB from 16 goroutines.
func BenchmarkUnaryDirect1MiBC16(b *testing.B) { benchUnaryParallel(b, PathDirect, 1<<20, 16) }

// BenchmarkUnaryTunnel1MiBC16 is BenchmarkUnaryTunnel1MiB from 16 goroutines: many large calls share
// the agent's connection to kas.
func BenchmarkUnaryTunnel1MiBC16(b *testing.B) { benchUnaryParallel(b, PathTunnel, 1<<20, 16) }

func benchHTTPGet(b *testing.B, tunnel bool) {
	topo, err := StartTopology(context.Background(), TopologyConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer topo.Close(context.Background())
	url := topo.HTTPUpstream + "/payload"
	if tunnel {
		url = topo.HTTPTunnel + "/agents/1/payload"
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	b.ReportAllocs()
	b.ResetTimer()
	defer countGoroutines(b)()
	for range b.N {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || n != HTTPPayload {
			b.Fatalf("GET %s: %d, %d bytes, %v", url, resp.StatusCode, n, err)
		}
	}
}

// BenchmarkHTTPGetDirect fetches 1 KiB from the topology's HTTP upstream directly.
func BenchmarkHTTPGetDirect(b *testing.B) { benchHTTPGet(b, false) }

// BenchmarkHTTPGetTunnel fetches the same through kas's HTTP listener and agent 1.
func BenchmarkHTTPGetTunnel(b *testing.B) { benchHTTPGet(b, true) }

// BenchmarkUnaryDirect4KiB is BenchmarkUnaryDirect with 4 KiB each way: a medium message, batched on the
// tunnel.
func BenchmarkUnaryDirect4KiB(b *testing.B) { benchUnary(b, PathDirect, 4<<10) }

// BenchmarkUnaryTunnel4KiB is BenchmarkUnaryTunnel with 4 KiB each way.
func BenchmarkUnaryTunnel4KiB(b *testing.B) { benchUnary(b, PathTunnel, 4<<10) }

// BenchmarkUnaryTunnel2Hop4KiB is BenchmarkUnaryTunnel4KiB entering at a kas without the agent's tunnel:
// the second kas batches the agent's medium answer payload onto the hop stream.
func BenchmarkUnaryTunnel2Hop4KiB(b *testing.B) { benchUnary(b, PathTunnel2Hop, 4<<10) }
