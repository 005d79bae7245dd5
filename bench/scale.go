package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tunnelbench/tunnelbench/core/rpc"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/bench/topology/proc"
	"github.com/tunnelbench/tunnelbench/bench/tunnels"
	"github.com/tunnelbench/tunnelbench/core/demo"
)

// Scale defaults.
const (
	// DefaultScaleRate is the rate of calls, spread over all agents, whose routing p99 a step reports.
	DefaultScaleRate = 200
	// DefaultScaleCalls is how long that load runs.
	DefaultScaleLoad = 3 * time.Second
	// scaleConnectTimeout bounds how long agents may take to connect at one step.
	scaleConnectTimeout = 5 * time.Minute
)

// DefaultScaleSteps are the agent counts of the default run.
var DefaultScaleSteps = []int{1000, 5000, 10000}

// ScaleOptions configure the scale case.
type ScaleOptions struct {
	// Steps are the agent counts, each connected to a fresh kas.
	Steps           []int
	TunnelsPerAgent int
	Rate            float64
	Load            time.Duration
	// AgentsCommand, when set, runs the agents of a step in a separate process (so that kas's heap and
	// the agents' heap are measured apart): it returns the command for count agents with ids
	// 1..count dialing kasAddr. The process runs RunScaleAgents and reports on stdout. Nil runs the
	// agents in this process and reports only kas-side figures per tunnel measured together.
	AgentsCommand func(kasAddr string, count, tunnelsPerAgent int) *exec.Cmd
	Progress      func(string)
}

// RunScale connects each step's agents to one kas and measures what they cost.
func RunScale(ctx context.Context, opts ScaleOptions) ([]ScaleResult, error) {
	if opts.TunnelsPerAgent <= 0 {
		opts.TunnelsPerAgent = DefaultTunnelsPerAgent
	}
	if opts.Rate <= 0 {
		opts.Rate = DefaultScaleRate
	}
	if opts.Load <= 0 {
		opts.Load = DefaultScaleLoad
	}
	var out []ScaleResult
	for _, n := range opts.Steps {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf("scale: %d agents", n))
		}
		r, err := scaleStep(ctx, n, opts)
		if err != nil {
			return out, fmt.Errorf("scale %d agents: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func scaleStep(ctx context.Context, n int, opts ScaleOptions) (ScaleResult, error) {
	auth, err := topology.AgentTokens(n, AgentToken)
	if err != nil {
		return ScaleResult{}, err
	}
	tk, err := topology.StartKas(topology.KasConfig{Auth: auth, AgentOnly: true, ShutdownGrace: 5 * time.Second})
	if err != nil {
		return ScaleResult{}, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tk.Shutdown(sctx)
	}()
	k, mp := tk.Server, tk.Metrics
	route, err := tk.Route(topology.Hop{Kind: topology.AgentKas})
	if err != nil {
		return ScaleResult{}, err
	}
	mem0 := tunnels.Snapshot()
	nTunnels := n * opts.TunnelsPerAgent
	start := time.Now()
	agentReport, stopAgents, err := startStepAgents(ctx, route.Target, n, opts)
	if err != nil {
		return ScaleResult{}, err
	}
	defer stopAgents()
	if err := topology.WaitIdle(ctx, scaleConnectTimeout, int64(nTunnels), func() int64 { return k.Registry().Stats().IdleTunnels }); err != nil {
		return ScaleResult{}, err
	}
	connect := time.Since(start)
	mem1 := tunnels.Snapshot()

	// Routing under a fixed rate of calls spread over every agent.
	before := snapshotRouting([]prometheus.Gatherer{mp.Registry()})
	res, err := load.OpenLoop{Rate: opts.Rate, Duration: opts.Load}.Run(ctx, spreadCalls(k.InternalConn(), n))
	if err != nil {
		return ScaleResult{}, err
	}
	routing := addRouting(nil, before, snapshotRouting([]prometheus.Gatherer{mp.Registry()})).finish()

	r := ScaleResult{
		Agents:                 n,
		Tunnels:                nTunnels,
		ConnectS:               connect.Seconds(),
		KasHeapBytesPerTunnel:  float64(int64(mem1.Heap)-int64(mem0.Heap)) / float64(nTunnels),
		KasStackBytesPerTunnel: float64(int64(mem1.Stack)-int64(mem0.Stack)) / float64(nTunnels),
		KasGoroutinesPerTunnel: float64(mem1.Goroutines-mem0.Goroutines) / float64(nTunnels),
		RoutingP99us:           routing.P99us,
		Calls:                  res.Calls,
		Errors:                 res.Errors,
	}
	if agentReport != nil {
		r.AgentHeapBytesPerTunnel = float64(agentReport.HeapBytes) / float64(nTunnels)
		r.AgentHeapBytesPerAgent = float64(agentReport.HeapBytes) / float64(n)
		r.AgentStackBytesPerAgent = float64(agentReport.StackBytes) / float64(n)
		r.AgentGoroutinesPerAgent = float64(agentReport.Goroutines) / float64(n)
	} else {
		// Agents share this process: the figures above hold both sides.
		r.AgentHeapBytesPerTunnel = -1
		r.AgentHeapBytesPerAgent = -1
		r.AgentStackBytesPerAgent = -1
		r.AgentGoroutinesPerAgent = -1
	}
	return r, nil
}

// startStepAgents starts a step's n agents, in a process of their own when opts says how, and returns
// that process's report (nil for agents in this process) and how to stop them.
func startStepAgents(ctx context.Context, addr string, n int, opts ScaleOptions) (*AgentsReport, func(), error) {
	if opts.AgentsCommand != nil {
		return startAgentsProcess(ctx, opts.AgentsCommand(addr, n, opts.TunnelsPerAgent))
	}
	agents, err := startScaleAgents(ctx, addr, n, opts.TunnelsPerAgent)
	if err != nil {
		return nil, nil, err
	}
	return nil, func() { stopScaleAgents(agents) }, nil
}

// spreadCalls makes 64 B echo calls through conn to agents 1..n in turn.
func spreadCalls(conn grpc.ClientConnInterface, n int) func() load.Call {
	var next int64
	var mu sync.Mutex
	return func() load.Call {
		c := demo.NewDemoClient(conn)
		return func(ctx context.Context) (int, error) {
			mu.Lock()
			next = next%int64(n) + 1
			id := next
			mu.Unlock()
			ctx = metadata.AppendToOutgoingContext(ctx, rpc.RoutingAgentIDMetadataKey, strconv.FormatInt(id, 10))
			_, err := c.Echo(ctx, &demo.EchoRequest{Payload: make([]byte, 64)})
			return 128, err
		}
	}
}

// AgentsReport is what an agents process says about itself once every agent is connected.
type AgentsReport struct {
	Agents     int    `json:"agents"`
	HeapBytes  uint64 `json:"heap_bytes"`
	StackBytes uint64 `json:"stack_bytes"`
	Goroutines int    `json:"goroutines"`
}

// startScaleAgents connects count agents with ids 1..count (tokens from AgentToken), each serving the
// demo service, to the kas agent API at addr.
func startScaleAgents(ctx context.Context, addr string, count, tunnelsPerAgent int) (topology.Agents, error) {
	return topology.StartAgents(ctx, count, func(id int64) (topology.AgentConfig, error) {
		return topology.AgentConfig{ID: id, Route: topology.Route{Target: addr}, MinIdle: tunnelsPerAgent}, nil
	})
}

func stopScaleAgents(agents topology.Agents) {
	ctx, cancel := context.WithTimeout(context.Background(), topology.DefaultStopGrace)
	defer cancel()
	agents.Stop(ctx)
}

// RunScaleAgents is the body of an agents process: it connects count agents to addr, writes one
// AgentsReport line to out once all have their idle tunnels, and runs until ctx ends.
func RunScaleAgents(ctx context.Context, addr string, count, tunnelsPerAgent int, out io.Writer) error {
	agents, err := startScaleAgents(ctx, addr, count, tunnelsPerAgent)
	if err != nil {
		return err
	}
	defer stopScaleAgents(agents)
	if err := topology.WaitIdle(ctx, scaleConnectTimeout, int64(count*tunnelsPerAgent), func() int64 { return int64(agents.Idle()) }); err != nil {
		return err
	}
	mem := tunnels.Snapshot()
	if err := json.NewEncoder(out).Encode(AgentsReport{Agents: count, HeapBytes: mem.Heap, StackBytes: mem.Stack, Goroutines: mem.Goroutines}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// startAgentsProcess runs cmd and waits for its report line.
func startAgentsProcess(ctx context.Context, cmd *exec.Cmd) (*AgentsReport, func(), error) {
	p, err := proc.StartCmd("agents process", cmd)
	if err != nil {
		return nil, nil, err
	}
	stop := func() { _ = p.Stop(30 * time.Second) }
	var line string
	if err := p.WaitReady(ctx, scaleConnectTimeout, func() bool {
		var ok bool
		line, _, ok = strings.Cut(p.Stdout(), "\n")
		return ok
	}); err != nil {
		stop()
		return nil, nil, fmt.Errorf("agents process did not report: %w", err)
	}
	var rep AgentsReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		stop()
		return nil, nil, fmt.Errorf("agents process report %q: %w", line, err)
	}
	return &rep, stop, nil
}
