package bench

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tunnelbench/tunnelbench/bench/topology"
	"github.com/tunnelbench/tunnelbench/bench/topology/proc"
)

// scrapeGatherer reads a process's /metrics as Prometheus would.
type scrapeGatherer struct {
	url    string
	client *http.Client
}

// scrapeAccept asks for the protobuf format first, as a Prometheus with native histograms does: the
// text format has no place for tunnel_routing_duration_exponential_seconds's buckets.
var scrapeAccept = string(expfmt.NewFormat(expfmt.TypeProtoDelim)) + ";q=0.7,text/plain;version=0.0.4;q=0.3"

func (g scrapeGatherer) Gather() ([]*dto.MetricFamily, error) {
	req, err := http.NewRequest(http.MethodGet, g.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", scrapeAccept)
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", g.url, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var out []*dto.MetricFamily
	for {
		f := &dto.MetricFamily{}
		if err := dec.Decode(f); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", g.url, err)
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// gaugeValue sums a gauge family's values whose labels include name=value.
func gaugeValue(g scrapeGatherer, family, name, value string) float64 {
	fams, err := g.Gather()
	if err != nil {
		return -1
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			if name == "" || hasLabel(m.GetLabel(), name, value) {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// startProcessTopology runs every kas, agent and the direct server as separate processes of bin (which
// must offer the kas, agentk and demo-server commands: tunnelbench does), as a user would deploy them.
func startProcessTopology(ctx context.Context, cfg TopologyConfig) (_ *Topology, err error) {
	bin := cfg.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find own binary: %w", err)
		}
	}
	t := &Topology{cfg: cfg}
	defer func() {
		if err != nil {
			t.Close(context.Background())
		}
	}()
	if t.tempDir, err = os.MkdirTemp("", "tunnelbench-topology-"); err != nil {
		return nil, err
	}
	kasArgs, err := t.processKasArgs()
	if err != nil {
		return nil, err
	}
	if err := t.startHTTPUpstream(); err != nil {
		return nil, err
	}
	var agentAddrs []string
	for i := range cfg.Kas {
		addr, err := t.startKasProcess(ctx, bin, i, kasArgs)
		if err != nil {
			return nil, err
		}
		agentAddrs = append(agentAddrs, addr)
	}
	if err := t.startDirectProcess(ctx, bin); err != nil {
		return nil, err
	}
	for id := int64(1); id <= int64(cfg.Agents); id++ {
		if err := t.start(fmt.Sprintf("agentk %d", id), bin, "agentk", "--kas-address", agentAddrs[0], "--token", AgentToken(id),
			"--min-idle", strconv.Itoa(cfg.TunnelsPerAgent), "--max-message-size", strconv.Itoa(cfg.MaxMessageSize),
			"--http-upstream", t.HTTPUpstream, "--log-level", "warn"); err != nil {
			return nil, err
		}
	}
	want := float64(cfg.Agents * cfg.TunnelsPerAgent)
	if err := t.procs[len(t.procs)-1].WaitReady(ctx, 0, func() bool {
		return gaugeValue(t.scrapers[0], "tunnel_tunnels", "state", "idle") >= want
	}); err != nil {
		return nil, fmt.Errorf("agents did not connect: %w", err)
	}
	return t, nil
}

// start runs a process of the topology.
func (t *Topology) start(name, bin string, args ...string) error {
	p, err := proc.Start(name, bin, args...)
	if err != nil {
		return err
	}
	t.procs = append(t.procs, p)
	return nil
}

// processKasArgs writes the agent tokens (and for several kas, the private API secret) to files and
// starts Redis, and returns the flags every kas process shares.
func (t *Topology) processKasArgs() ([]string, error) {
	var tokens strings.Builder
	for id := int64(1); id <= int64(t.cfg.Agents); id++ {
		fmt.Fprintf(&tokens, "%d=%s\n", id, AgentToken(id))
	}
	tokensFile := filepath.Join(t.tempDir, "agent-tokens")
	if err := os.WriteFile(tokensFile, []byte(tokens.String()), 0o600); err != nil {
		return nil, err
	}
	args := []string{"--agent-tokens-file", tokensFile, "--dev", "--max-message-size", strconv.Itoa(t.cfg.MaxMessageSize), "--log-level", "warn"}
	if t.cfg.Kas == 1 {
		return args, nil
	}
	// Processes share no memory: several kas need Redis as their tracker.
	var err error
	if t.redis, err = proc.StartRedis(t.tempDir); err != nil {
		return nil, fmt.Errorf("several kas processes need Redis as their tracker: %w", err)
	}
	secret, err := topology.NewSecret()
	if err != nil {
		return nil, err
	}
	secretFile := filepath.Join(t.tempDir, "private-api-secret")
	if err := os.WriteFile(secretFile, []byte(base64.StdEncoding.EncodeToString(secret)), 0o600); err != nil {
		return nil, err
	}
	return append(args, "--redis-address", t.redis.Addr(), "--private-api-secret-file", secretFile, "--tracker-refresh-period", "5s", "--tracker-ttl", "20s"), nil
}

// startKasProcess starts kas i, waits until it is ready, and returns its agent API address.
func (t *Topology) startKasProcess(ctx context.Context, bin string, i int, shared []string) (string, error) {
	addrs := map[string]string{}
	for _, name := range []string{"agent", "api", "private", "metrics", "http"} {
		var err error
		if addrs[name], err = proc.FreeAddr(); err != nil {
			return "", err
		}
	}
	args := append([]string{"kas",
		"--agent-listen", addrs["agent"], "--api-listen", addrs["api"], "--private-listen", addrs["private"],
		"--metrics-listen", addrs["metrics"], "--http-listen", addrs["http"],
	}, shared...)
	if t.cfg.FindTimeout > 0 {
		args = append(args, "--tunnel-find-timeout", t.cfg.FindTimeout.String())
	}
	if t.cfg.MaxConnectionAge > 0 {
		args = append(args, "--max-connection-age", t.cfg.MaxConnectionAge.String())
	} else {
		args = append(args, "--max-connection-age", "0")
	}
	if err := t.start(fmt.Sprintf("kas %d", i), bin, args...); err != nil {
		return "", err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	ready := "http://" + addrs["metrics"] + "/readyz"
	if err := t.procs[len(t.procs)-1].WaitReady(ctx, 0, func() bool {
		resp, err := client.Get(ready)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		return "", err
	}
	g := scrapeGatherer{url: "http://" + addrs["metrics"] + "/metrics", client: client}
	t.Gatherers = append(t.Gatherers, g)
	t.scrapers = append(t.scrapers, g)
	pub, err := dialCaller(addrs["api"], t.cfg.MaxMessageSize)
	if err != nil {
		return "", err
	}
	t.public = append(t.public, pub)
	if i == 0 {
		t.HTTPTunnel = "http://" + addrs["http"]
	}
	return addrs["agent"], nil
}

// startDirectProcess starts the demo server that the direct path calls.
func (t *Topology) startDirectProcess(ctx context.Context, bin string) error {
	addr, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	if err := t.start("demo-server", bin, "demo-server", "--listen", addr); err != nil {
		return err
	}
	if err := t.procs[len(t.procs)-1].WaitReady(ctx, 0, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}); err != nil {
		return err
	}
	t.Direct, err = dialCaller(addr, t.cfg.MaxMessageSize)
	return err
}
