package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// processStartTimeout bounds how long a kas, agentk or Redis process may take to become ready.
const processStartTimeout = 30 * time.Second

// child is a process the topology started.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 { // keep the start of the output: that is where start-up errors are
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startChild(name, bin string, args ...string) (*child, error) {
	c := &child{name: name, cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// exited reports an error with the child's output if it is no longer running.
func (c *child) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited: %s", c.name, strings.TrimSpace(lastLines(c.out.String(), 5)))
	default:
		return nil
	}
}

// stop asks the child to stop (SIGTERM) and kills it after grace.
func (c *child) stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(interrupt)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// scrapeGatherer reads a process's /metrics as Prometheus would.
type scrapeGatherer struct {
	url    string
	client *http.Client
}

func (g scrapeGatherer) Gather() ([]*dto.MetricFamily, error) {
	resp, err := g.client.Get(g.url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", g.url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.url, err)
	}
	out := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
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
	dir, err := os.MkdirTemp("", "tunnelbench-topology-")
	if err != nil {
		return nil, err
	}
	t.tempDir = dir
	var tokens strings.Builder
	for id := int64(1); id <= int64(cfg.Agents); id++ {
		fmt.Fprintf(&tokens, "%d=%s\n", id, AgentToken(id))
	}
	tokensFile := filepath.Join(dir, "agent-tokens")
	if err := os.WriteFile(tokensFile, []byte(tokens.String()), 0o600); err != nil {
		return nil, err
	}
	var replicaArgs []string
	if cfg.Kas > 1 {
		// Processes share no memory: several kas need Redis as their tracker.
		redisAddr, err := t.startRedis()
		if err != nil {
			return nil, err
		}
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		secretFile := filepath.Join(dir, "private-api-secret")
		if err := os.WriteFile(secretFile, []byte(base64.StdEncoding.EncodeToString(secret)), 0o600); err != nil {
			return nil, err
		}
		replicaArgs = []string{"--redis-address", redisAddr, "--private-api-secret-file", secretFile, "--tracker-refresh-period", "5s", "--tracker-ttl", "20s"}
	}
	if err := t.startHTTPUpstream(); err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	var agentAddrs []string
	for i := range cfg.Kas {
		addrs := map[string]string{}
		for _, name := range []string{"agent", "api", "private", "metrics", "http"} {
			if addrs[name], err = freeAddr(); err != nil {
				return nil, err
			}
		}
		args := append([]string{"kas",
			"--agent-listen", addrs["agent"], "--api-listen", addrs["api"], "--private-listen", addrs["private"],
			"--metrics-listen", addrs["metrics"], "--http-listen", addrs["http"], "--agent-tokens-file", tokensFile, "--dev",
			"--max-message-size", strconv.Itoa(cfg.MaxMessageSize), "--log-level", "warn",
		}, replicaArgs...)
		if cfg.FindTimeout > 0 {
			args = append(args, "--tunnel-find-timeout", cfg.FindTimeout.String())
		}
		if cfg.MaxConnectionAge > 0 {
			args = append(args, "--max-connection-age", cfg.MaxConnectionAge.String())
		} else {
			args = append(args, "--max-connection-age", "0")
		}
		c, err := startChild(fmt.Sprintf("kas %d", i), bin, args...)
		if err != nil {
			return nil, err
		}
		t.children = append(t.children, c)
		ready := "http://" + addrs["metrics"] + "/readyz"
		if err := waitChild(ctx, c, func() bool {
			resp, err := client.Get(ready)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}); err != nil {
			return nil, err
		}
		g := scrapeGatherer{url: "http://" + addrs["metrics"] + "/metrics", client: client}
		t.Gatherers = append(t.Gatherers, g)
		t.scrapers = append(t.scrapers, g)
		pub, err := dialCaller(mustTCPAddr(addrs["api"]), nil, cfg.MaxMessageSize)
		if err != nil {
			return nil, err
		}
		t.public = append(t.public, pub)
		agentAddrs = append(agentAddrs, addrs["agent"])
		if i == 0 {
			t.HTTPTunnel = "http://" + addrs["http"]
		}
	}
	directAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	d, err := startChild("demo-server", bin, "demo-server", "--listen", directAddr)
	if err != nil {
		return nil, err
	}
	t.children = append(t.children, d)
	if err := waitChild(ctx, d, func() bool {
		c, err := net.DialTimeout("tcp", directAddr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}); err != nil {
		return nil, err
	}
	if t.Direct, err = dialCaller(mustTCPAddr(directAddr), nil, cfg.MaxMessageSize); err != nil {
		return nil, err
	}
	for id := int64(1); id <= int64(cfg.Agents); id++ {
		c, err := startChild(fmt.Sprintf("agentk %d", id), bin, "agentk", "--kas-address", agentAddrs[0], "--token", AgentToken(id),
			"--min-idle", strconv.Itoa(cfg.TunnelsPerAgent), "--max-message-size", strconv.Itoa(cfg.MaxMessageSize),
			"--http-upstream", t.HTTPUpstream, "--log-level", "warn")
		if err != nil {
			return nil, err
		}
		t.children = append(t.children, c)
	}
	want := float64(cfg.Agents * cfg.TunnelsPerAgent)
	if err := waitChild(ctx, t.children[len(t.children)-1], func() bool {
		return gaugeValue(t.scrapers[0], "tunnel_tunnels", "state", "idle") >= want
	}); err != nil {
		return nil, fmt.Errorf("agents did not connect: %w", err)
	}
	return t, nil
}

func mustTCPAddr(s string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		panic(err) // freeAddr's own output always resolves
	}
	return a
}

// waitChild polls cond until it holds, the child exits, or the start timeout passes.
func waitChild(ctx context.Context, c *child, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, processStartTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if err := c.exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w; its output: %s", c.name, processStartTimeout, ctx.Err(), lastLines(c.out.String(), 5))
		case <-tick.C:
		}
	}
	return nil
}

// startRedis runs a throw-away redis-server on loopback for the kas processes' tracker.
func (t *Topology) startRedis() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("several kas processes need Redis as their tracker: install redis-server (apt-get install -y redis-server)")
	}
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	c, err := startChild("redis-server", bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.tempDir)
	if err != nil {
		return "", err
	}
	t.children = append(t.children, c)
	err = waitChild(context.Background(), c, func() bool {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
			return false
		}
		buf := make([]byte, 7)
		n, _ := io.ReadFull(conn, buf)
		return strings.HasPrefix(string(buf[:n]), "+PONG")
	})
	return addr, err
}
