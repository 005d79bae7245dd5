package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/metadata"

	"github.com/tunnelbench/tunnelbench/bench/load"
	"github.com/tunnelbench/tunnelbench/core/demo"
	"github.com/tunnelbench/tunnelbench/core/kas"
	"github.com/tunnelbench/tunnelbench/core/metrics"
	"github.com/tunnelbench/tunnelbench/core/rpc"
	"github.com/tunnelbench/tunnelbench/core/tunclient"
	"github.com/tunnelbench/tunnelbench/core/tunserver/auth"
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

func heapAndGoroutines() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, runtime.NumGoroutine()
}

func scaleStep(ctx context.Context, n int, opts ScaleOptions) (ScaleResult, error) {
	tokens := make(map[string]int64, n)
	for id := int64(1); id <= int64(n); id++ {
		tokens[AgentToken(id)] = id
	}
	auth, err := auth.NewStaticTokens(tokens)
	if err != nil {
		return ScaleResult{}, err
	}
	mp, err := metrics.New()
	if err != nil {
		return ScaleResult{}, err
	}
	defer func() { _ = mp.Shutdown(context.Background()) }()
	k, err := kas.New(kas.Config{AgentListen: "127.0.0.1:0", Authenticator: auth, MaxConnectionAge: -1, Metrics: mp, ShutdownGrace: 5 * time.Second})
	if err != nil {
		return ScaleResult{}, err
	}
	if err := k.Start(); err != nil {
		return ScaleResult{}, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		k.Shutdown(sctx)
	}()
	heap0, gor0 := heapAndGoroutines()
	tunnels := n * opts.TunnelsPerAgent
	start := time.Now()
	var agentReport *AgentsReport
	var stopAgents func()
	if opts.AgentsCommand != nil {
		cmd := opts.AgentsCommand(k.Addrs().Agent.String(), n, opts.TunnelsPerAgent)
		rep, stop, err := startAgentsProcess(ctx, cmd)
		if err != nil {
			return ScaleResult{}, err
		}
		stopAgents = stop
		agentReport = rep
	} else {
		agents, err := StartAgents(ctx, k.Addrs().Agent.String(), 1, n, opts.TunnelsPerAgent)
		if err != nil {
			return ScaleResult{}, err
		}
		stopAgents = agents.Stop
	}
	defer stopAgents()
	if err := waitFor(ctx, scaleConnectTimeout, func() bool { return k.Registry().Stats().IdleTunnels >= int64(tunnels) }); err != nil {
		return ScaleResult{}, fmt.Errorf("only %d of %d tunnels connected: %w", k.Registry().Stats().IdleTunnels, tunnels, err)
	}
	connect := time.Since(start)
	heap1, gor1 := heapAndGoroutines()

	// Routing under a fixed rate of calls spread over every agent.
	var next int64
	var mu sync.Mutex
	conn := k.InternalConn()
	newCall := func() load.Call {
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
	before := snapshotRouting([]prometheus.Gatherer{mp.Registry()})
	res, err := load.OpenLoop{Rate: opts.Rate, Duration: opts.Load}.Run(ctx, newCall)
	if err != nil {
		return ScaleResult{}, err
	}
	routing := addRouting(nil, before, snapshotRouting([]prometheus.Gatherer{mp.Registry()})).finish()

	r := ScaleResult{
		Agents:                 n,
		Tunnels:                tunnels,
		ConnectS:               connect.Seconds(),
		KasHeapBytesPerTunnel:  float64(int64(heap1)-int64(heap0)) / float64(tunnels),
		KasGoroutinesPerTunnel: float64(gor1-gor0) / float64(tunnels),
		RoutingP99us:           routing.P99us,
		Calls:                  res.Calls,
		Errors:                 res.Errors,
	}
	if agentReport != nil {
		r.AgentHeapBytesPerTunnel = float64(agentReport.HeapBytes) / float64(tunnels)
		r.AgentHeapBytesPerAgent = float64(agentReport.HeapBytes) / float64(n)
	} else {
		// Agents share this process: the figures above hold both sides.
		r.AgentHeapBytesPerTunnel = -1
		r.AgentHeapBytesPerAgent = -1
	}
	return r, nil
}

// AgentsReport is what an agents process says about itself once every agent is connected.
type AgentsReport struct {
	Agents     int    `json:"agents"`
	HeapBytes  uint64 `json:"heap_bytes"`
	Goroutines int    `json:"goroutines"`
}

// Agents is a set of agents running in this process.
type Agents struct {
	agents []*tunclient.Agent
	conns  []interface{ Close() error }
}

// StartAgents connects count agents with ids first..first+count-1 (tokens from AgentToken), each
// serving the demo service, to the kas agent API at addr.
func StartAgents(ctx context.Context, addr string, first, count, tunnelsPerAgent int) (*Agents, error) {
	a := &Agents{}
	for id := first; id < first+count; id++ {
		if err := ctx.Err(); err != nil {
			a.Stop()
			return nil, err
		}
		conn, err := tunclient.DialKas(addr, AgentToken(int64(id)))
		if err != nil {
			a.Stop()
			return nil, err
		}
		ag, err := tunclient.New(tunclient.Config{KasConn: conn, MinIdle: tunnelsPerAgent})
		if err != nil {
			_ = conn.Close()
			a.Stop()
			return nil, err
		}
		demo.Register(ag)
		if err := ag.Start(); err != nil {
			ag.Stop(context.Background())
			_ = conn.Close()
			a.Stop()
			return nil, err
		}
		a.agents = append(a.agents, ag)
		a.conns = append(a.conns, conn)
	}
	return a, nil
}

// Idle is the number of idle tunnels of all agents.
func (a *Agents) Idle() int {
	n := 0
	for _, ag := range a.agents {
		n += ag.Stats().Idle
	}
	return n
}

// Stop stops every agent.
func (a *Agents) Stop() {
	var wg sync.WaitGroup
	for i, ag := range a.agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ag.Stop(ctx)
			_ = a.conns[i].Close()
		}()
	}
	wg.Wait()
	a.agents, a.conns = nil, nil
}

// RunScaleAgents is the body of an agents process: it connects count agents to addr, writes one
// AgentsReport line to out once all have their idle tunnels, and runs until ctx ends.
func RunScaleAgents(ctx context.Context, addr string, count, tunnelsPerAgent int, out io.Writer) error {
	agents, err := StartAgents(ctx, addr, 1, count, tunnelsPerAgent)
	if err != nil {
		return err
	}
	defer agents.Stop()
	if err := waitFor(ctx, scaleConnectTimeout, func() bool { return agents.Idle() >= count*tunnelsPerAgent }); err != nil {
		return fmt.Errorf("agents did not connect: %w", err)
	}
	heap, gor := heapAndGoroutines()
	if err := json.NewEncoder(out).Encode(AgentsReport{Agents: count, HeapBytes: heap, Goroutines: gor}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// startAgentsProcess runs cmd and waits for its report line.
func startAgentsProcess(ctx context.Context, cmd *exec.Cmd) (*AgentsReport, func(), error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start agents process: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(interrupt)
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			stop()
			return nil, nil, fmt.Errorf("agents process ended without a report: %s", strings.TrimSpace(stderr.String()))
		}
		var rep AgentsReport
		if err := json.Unmarshal([]byte(line), &rep); err != nil {
			stop()
			return nil, nil, fmt.Errorf("agents process report %q: %w", line, err)
		}
		return &rep, stop, nil
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	case <-time.After(scaleConnectTimeout):
		stop()
		return nil, nil, errors.New("agents process did not report in time")
	}
}
