package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunnelbench/tunnelbench/chaos"
)

const minimal = `name: t
load:
  rate: 10
  duration: 30s
expect:
  zero_failed: true
`

func TestParseDefaults(t *testing.T) {
	s, err := Parse("t.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := Topology{Kas: DefaultKas, Agents: DefaultAgents, TunnelsPerAgent: DefaultTunnelsPerAgent, FindTimeout: DefaultFindTimeout, Tracker: TrackerMemory}
	if s.Topology != want {
		t.Errorf("topology %+v; want %+v", s.Topology, want)
	}
	wl := Workload{Shape: "unary", Payload: 1024, Rate: 10, Duration: 30 * time.Second, CallTimeout: DefaultCallTimeout, Entry: EntryAll, Targets: TargetsAll}
	if s.Load != wl {
		t.Errorf("load %+v; want %+v", s.Load, wl)
	}
	if len(s.Expect) != 1 || s.Expect[0].String() != "failed_calls <= 0" || s.Expect[0].Line != 6 {
		t.Errorf("expect %+v", s.Expect)
	}
}

func TestParseFull(t *testing.T) {
	s, err := Parse("full.yaml", []byte(`name: full-1
description: every key
topology:
  kas: 3
  agents: 12
  tunnels_per_agent: 3
  max_connection_age: 2s
  find_timeout: 3s
  tracker: redis
load:
  shape: server-stream
  payload: 64KiB
  workers: 8
  duration: 1m
  call_timeout: 4s
  entry: 2
  targets: remote
faults:
  - at: 5s
    for: 10s
    link: kas->redis
    type: blackhole
    select: {kas: [0, 2]}
    deadline: 3s
  - at: 20s
    link: agent->kas
    type: latency
    params: {latency: 50ms, direction: upstream}
    select: {agents: [1, "3..4"]}
  - at: 30s
    for: 5s
    process: kill-agents
    select: {count: 2}
  - at: 40s
    process: kill-kas
    select: {kas: 1}
expect:
  success_ratio: ">= 0.99"
  latency_p90: "< 1s"
  routing_timeouts: "<= 3"
  recovery: "<= 20s"
  reconnect_rate: "<= 100"
  max_failed: inflight_at_kill
  unaffected:
    success_ratio: "== 1"
    max_failed: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Topology.Tracker != TrackerRedis || s.Topology.MaxConnectionAge != 2*time.Second || s.Load.Workers != 8 || s.Load.Entry != 2 || s.Load.Payload != 64<<10 {
		t.Errorf("%+v %+v", s.Topology, s.Load)
	}
	if len(s.Faults) != 4 {
		t.Fatalf("%d faults", len(s.Faults))
	}
	f := s.Faults[0]
	if f.Line != 19 || f.End(s.Load.Duration) != 15*time.Second || f.Deadline != 3*time.Second || f.Network.Type() != "blackhole" || f.String() != "5s+10s kas->redis blackhole (kas [0 2])" {
		t.Errorf("fault 0: %+v, %s", f, f)
	}
	if f := s.Faults[1]; f.End(s.Load.Duration) != time.Minute || !slices.Equal(f.Select.Agents, []int64{1, 3, 4}) {
		t.Errorf("fault 1: %s %v", f.Select, f.End(s.Load.Duration))
	}
	if f := s.Faults[2]; f.Process.Type() != "kill-agents" || f.End(s.Load.Duration) != 35*time.Second {
		t.Errorf("fault 2: %v", f)
	}
	if f := s.Faults[3]; f.End(s.Load.Duration) != -1 || f.Deadline != chaos.DefaultChangeDeadline {
		t.Errorf("fault 3: %v", f)
	}
	affected, ok := s.AffectedAgents()
	if !ok || len(affected) != 4 { // 1, 3, 4 by latency; 1, 2 killed
		t.Errorf("affected agents %v", affected)
	}
	var got []string
	for _, o := range s.Expect {
		got = append(got, o.String())
	}
	want := "success_ratio >= 0.99; latency_p90 < 1s; routing_timeouts <= 3; recovery <= 20s; reconnect_rate <= 100; failed_calls <= inflight_at_kill; unaffected success_ratio == 1; unaffected failed_calls <= 2"
	if strings.Join(got, "; ") != want {
		t.Errorf("objectives:\n%s\nwant\n%s", strings.Join(got, "; "), want)
	}
}

// Every error names the file, the line and column, and the key.
func TestParseErrors(t *testing.T) {
	const (
		topo1 = "name: t\ntopology: {kas: 1}\nload: {rate: 10, duration: 30s}\n"
		topo3 = "name: t\ntopology: {kas: 3, agents: 10}\nload: {rate: 10, duration: 30s}\n"
		ok    = "expect: {zero_failed: true}\n"
	)
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"empty", "", []string{"x.yaml: the file is empty"}},
		{"not a mapping", "- a\n- b\n", []string{"x.yaml:1:1: a scenario is a mapping of keys"}},
		{"syntax", "name: t\nload: [\n", []string{"x.yaml:2:1: did not find expected node content"}},
		{"unquoted >", "name: t\nexpect:\n  success_ratio: >= 0.9\n  latency_p99: 1s\n", []string{`(quote objectives that start with ">", e.g. ">= 0.999")`}},
		{"two documents", minimal + "---\nname: u\n", []string{"x.yaml:7:1: only one YAML document per file"}},
		{"alias", "name: &n t\n", []string{"x.yaml:1:7: anchors and aliases are not supported"}},
		{"unknown key", minimal + "topologie: {}\n", []string{"x.yaml:7:1: topologie: unknown key (want name, description, topology, load, faults, expect)"}},
		{"unknown nested key", "name: t\ntopology:\n  kas: 2\n  agent: 3\nload: {rate: 1, duration: 30s}\n" + ok,
			[]string{"x.yaml:4:3: topology.agent: unknown key (want kas, agents, tunnels_per_agent"}},
		{"duplicate key", minimal + "name: u\n", []string{"x.yaml:7:1: name: duplicate key (first at line 1)"}},
		{"missing", "description: x\n", []string{
			"x.yaml:1:1: name: required",
			"x.yaml:1:1: load: required",
			"x.yaml:1:1: expect: required: at least one objective",
		}},
		{"bad name", strings.Replace(minimal, "name: t", "name: Kas Kill", 1), []string{`x.yaml:1:7: name: "Kas Kill": want lower-case letters, digits and dashes`}},
		{"bad duration", "name: t\nload:\n  rate: 10\n  duration: 10x\n" + ok, []string{`x.yaml:4:13: load.duration: bad duration "10x" (want e.g. 500ms, 10s or 1m)`}},
		{"no duration", "name: t\nload:\n  rate: 10\n" + ok, []string{"x.yaml:2:1: load.duration: required"}},
		{"bad number", "name: t\ntopology:\n  kas: three\nload: {rate: 1, duration: 30s}\n" + ok, []string{`x.yaml:3:8: topology.kas: bad number "three" (want a whole number)`}},
		{"float number", "name: t\ntopology:\n  agents: 2.5\nload: {rate: 1, duration: 30s}\n" + ok, []string{`x.yaml:3:11: topology.agents: bad number "2.5"`}},
		{"negative", "name: t\ntopology:\n  tunnels_per_agent: -1\nload: {rate: 1, duration: 30s}\n" + ok, []string{"x.yaml:3:22: topology.tunnels_per_agent: -1 is out of range (want 1 to 500)"}},
		{"negative duration", "name: t\ntopology: {find_timeout: -5s}\nload: {rate: 1, duration: 30s}\n" + ok, []string{"x.yaml:2:26: topology.find_timeout: -5s is out of range"}},
		{"short max age", "name: t\ntopology: {max_connection_age: 100ms}\nload: {rate: 1, duration: 30s}\n" + ok, []string{"x.yaml:2:32: topology.max_connection_age: 100ms is too short (want 0 for never, or at least 500ms)"}},
		{"bad tracker", "name: t\ntopology: {tracker: etcd}\nload: {rate: 1, duration: 30s}\n" + ok, []string{`x.yaml:2:21: topology.tracker: unknown value "etcd" (want memory, redis)`}},
		{"null value", "name: t\ntopology:\n  kas:\nload: {rate: 1, duration: 30s}\n" + ok, []string{"x.yaml:3:3: topology.kas: missing value"}},
		{"list for scalar", "name: [t]\nload: {rate: 1, duration: 30s}\n" + ok, []string{"x.yaml:1:7: name: want a single value, not a list or mapping"}},
		{"rate and workers", "name: t\nload: {rate: 1, workers: 2, duration: 30s}\n" + ok, []string{"x.yaml:2:8: load.rate: set rate (open loop) or workers (closed loop), not both"}},
		{"no rate", "name: t\nload: {duration: 30s}\n" + ok, []string{"x.yaml:2:1: load: rate (calls per second) or workers is required"}},
		{"bad rate", "name: t\nload: {rate: -3, duration: 30s}\n" + ok, []string{`x.yaml:2:14: load.rate: bad rate "-3"`}},
		{"bad shape", "name: t\nload: {shape: unaryy, rate: 1, duration: 30s}\n" + ok, []string{`x.yaml:2:15: load.shape: unknown value "unaryy" (want unary, server-stream, client-stream, bidi, sleep)`}},
		{"bad payload", "name: t\nload: {payload: 1GiB, rate: 1, duration: 30s}\n" + ok, []string{`x.yaml:2:17: load.payload: bad size "1GiB"`}},
		{"huge payload", "name: t\nload: {payload: 8MiB, rate: 1, duration: 30s}\n" + ok, []string{"x.yaml:2:17: load.payload: 8MiB is more than the largest message, 4194304 bytes"}},
		{"entry out of range", "name: t\ntopology: {kas: 2}\nload: {rate: 1, duration: 30s, entry: 2}\n" + ok, []string{"x.yaml:3:39: load.entry: no kas 2 (the topology has kas 0..1)"}},
		{"targets without entry", "name: t\ntopology: {kas: 2, agents: 4}\nload: {rate: 1, duration: 30s, targets: local}\n" + ok, []string{"x.yaml:3:41: load.targets: local agents are relative to one kas: set entry to a kas index"}},
		{"remote with one kas", "name: t\nload: {rate: 1, duration: 30s, entry: 0, targets: remote}\n" + ok, []string{"x.yaml:2:51: load.targets: remote agents need at least 2 kas (the topology has 1)"}},
		{"no local agents", "name: t\ntopology: {kas: 3, agents: 2}\nload: {rate: 1, duration: 30s, entry: 2, targets: local}\n" + ok, []string{"x.yaml:3:51: load.targets: no agent is local to kas 2"}},

		// Faults.
		{"kas->kas with one kas", topo1 + "faults:\n  - at: 1s\n    link: kas->kas\n    type: latency\n    params: {latency: 1ms}\n" + ok,
			[]string{"x.yaml:6:11: faults[0].link: the topology has no kas->kas link: it needs at least 2 kas (it has 1)"}},
		{"kas->redis without redis", topo3 + "faults:\n  - at: 1s\n    link: kas->redis\n    type: link-down\n" + ok,
			[]string{"x.yaml:6:11: faults[0].link: the topology has no kas->redis link: it needs tracker: redis (it uses memory)"}},
		{"unknown link", topo3 + "faults:\n  - at: 1s\n    link: agent->redis\n    type: link-down\n" + ok,
			[]string{`x.yaml:6:11: faults[0].link: unknown link "agent->redis"`}},
		{"fault at beyond load", topo3 + "faults:\n  - at: 30s\n    link: agent->kas\n    type: link-down\n" + ok,
			[]string{"x.yaml:5:9: faults[0].at: 30s is not within the load duration 30s"}},
		{"fault for beyond load", topo3 + "faults:\n  - at: 20s\n    for: 15s\n    link: agent->kas\n    type: link-down\n" + ok,
			[]string{"x.yaml:6:10: faults[0].for: the fault would end at 35s, after the load (duration 30s)"}},
		{"fault bad at", topo3 + "faults:\n  - at: soon\n    link: agent->kas\n    type: link-down\n" + ok,
			[]string{`x.yaml:5:9: faults[0].at: bad duration "soon"`}},
		{"fault without at", topo3 + "faults:\n  - link: agent->kas\n    type: link-down\n" + ok,
			[]string{"x.yaml:5:5: faults[0].at: required"}},
		{"fault without kind", topo3 + "faults:\n  - at: 1s\n" + ok,
			[]string{"x.yaml:5:5: faults[0]: a fault needs link (with type) or process"}},
		{"fault with both kinds", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    process: kill-kas\n" + ok,
			[]string{"x.yaml:7:5: faults[0].process: a fault is on a link or a process, not both"}},
		{"link without type", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n" + ok,
			[]string{"x.yaml:6:5: faults[0].type: required with link (one of bandwidth, blackhole, latency"}},
		{"unknown fault type", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: latencyy\n" + ok,
			[]string{`x.yaml:7:11: faults[0].type: unknown fault type "latencyy"`}},
		{"bad param", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: latency\n    params:\n      latency: 10x\n      jitter: 1ms\n      jiter: 2ms\n" + ok,
			[]string{
				`x.yaml:9:16: faults[0].params.latency: bad duration "10x" (want e.g. 100ms or 2s)`,
				"x.yaml:11:14: faults[0].params.jiter: unknown param (want one of latency, jitter, direction)",
			}},
		{"missing param", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: bandwidth\n    params: {direction: up}\n" + ok,
			[]string{
				"x.yaml:8:5: faults[0].params.rate: required (e.g. 500KB/s or 2MB/s)",
				`x.yaml:8:25: faults[0].params.direction: unknown direction "up"`,
			}},
		{"missing param without params", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: slow-close\n" + ok,
			[]string{"x.yaml:7:11: faults[0].params.delay: required"}},
		{"select two keys", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: link-down\n    select: {count: 1, fraction: 0.5}\n" + ok,
			[]string{"x.yaml:8:13: faults[0].select: set one of count, fraction, kas and agents"}},
		{"select unknown agent", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: link-down\n    select: {agents: [3, 11]}\n" + ok,
			[]string{"x.yaml:8:26: faults[0].select.agents: no agent 11 (the topology has agents 1..10)"}},
		{"select bad range", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: link-down\n    select: {agents: \"5..2\"}\n" + ok,
			[]string{`x.yaml:8:22: faults[0].select.agents: bad agent "5..2" (want an id from 1, or a range such as "1..5")`}},
		{"select agents on kas link", topo3 + "faults:\n  - at: 1s\n    link: caller->kas\n    type: link-down\n    select: {agents: 1}\n" + ok,
			[]string{"x.yaml:8:13: faults[0].select: agents select proxies of the agent->kas link only; caller->kas has one proxy per kas"}},
		{"select too many", topo3 + "faults:\n  - at: 1s\n    link: caller->kas\n    type: link-down\n    select: {count: 4}\n" + ok,
			[]string{"x.yaml:8:13: faults[0].select.count: count 4 is more than the 3 kas of caller->kas"}},
		{"select bad fraction", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: link-down\n    select: {fraction: 1.5}\n" + ok,
			[]string{`x.yaml:8:24: faults[0].select.fraction: bad fraction "1.5" (want a number above 0 and at most 1)`}},
		{"select kas twice", topo3 + "faults:\n  - at: 1s\n    link: caller->kas\n    type: link-down\n    select: {kas: [1, 1]}\n" + ok,
			[]string{"x.yaml:8:23: faults[0].select.kas: kas 1 is listed twice"}},

		// Process faults.
		{"kill missing kas", topo3 + "faults:\n  - at: 1s\n    process: kill-kas\n    select: {kas: 3}\n" + ok,
			[]string{"x.yaml:7:19: faults[0].select.kas: no kas 3 (the topology has kas 0..2)"}},
		{"kill without select", topo3 + "faults:\n  - at: 1s\n    process: kill-kas\n" + ok,
			[]string{"x.yaml:6:14: faults[0].process: kill-kas needs select: kas (indices), count or fraction"}},
		{"kill every kas", topo3 + "faults:\n  - at: 1s\n    process: stop-kas\n    select: {fraction: 1}\n" + ok,
			[]string{"x.yaml:7:13: faults[0].select: stop-kas would leave no kas running (the topology has 3)"}},
		{"kill with for", topo3 + "faults:\n  - at: 1s\n    for: 5s\n    process: kill-kas\n    select: {kas: 0}\n" + ok,
			[]string{"x.yaml:6:5: faults[0].for: kill-kas cannot be undone, so it takes no for"}},
		{"process with type", topo3 + "faults:\n  - at: 1s\n    process: kill-agents\n    type: latency\n" + ok,
			[]string{"x.yaml:7:5: faults[0].type: type is for link faults; a process fault is named by process"}},
		{"unknown process", topo3 + "faults:\n  - at: 1s\n    process: kill-all\n" + ok,
			[]string{`x.yaml:6:14: faults[0].process: unknown process fault type "kill-all"`}},
		{"redis without redis", topo3 + "faults:\n  - at: 1s\n    for: 2s\n    process: stop-redis\n" + ok,
			[]string{"x.yaml:7:14: faults[0].process: stop-redis needs tracker: redis (the topology uses memory)"}},
		{"redis with select", "name: t\ntopology: {tracker: redis}\nload: {rate: 10, duration: 30s}\nfaults:\n  - at: 1s\n    process: start-redis\n    select: {count: 1}\n" + ok,
			[]string{"x.yaml:7:5: faults[0].select: start-redis takes no select"}},
		{"agents by kas", topo3 + "faults:\n  - at: 1s\n    process: kill-agents\n    select: {kas: 0}\n" + ok,
			[]string{"x.yaml:7:13: faults[0].select: kill-agents selects agents, not kas"}},
		{"rolling past the load", topo3 + "faults:\n  - at: 25s\n    process: restart-agents\n    params: {mode: rolling, interval: 1s}\n" + ok,
			[]string{"x.yaml:6:14: faults[0].process: restarting 10 agents 1s apart takes 9s: it would end at 34s, after the load (duration 30s)"}},
		{"rolling param", topo3 + "faults:\n  - at: 1s\n    process: restart-agents\n    params: {interval: 1s}\n" + ok,
			[]string{"x.yaml:7:24: faults[0].params.interval: only a rolling restart has an interval"}},

		// Objectives.
		{"no objectives", minimal[:strings.Index(minimal, "expect")] + "expect: {}\n", []string{"x.yaml:5:1: expect: at least one objective is required"}},
		{"unknown objective", strings.Replace(minimal, "zero_failed", "zero_fails", 1), []string{"x.yaml:6:3: expect.zero_fails: unknown key (want success_ratio, latency_p50"}},
		{"objective without op", topo1 + "expect:\n  success_ratio: 0.99\n", []string{`x.yaml:5:18: expect.success_ratio: bad objective "0.99" (want an operator and a value, e.g. ">= 0.999" or "<= 500ms")`}},
		{"ratio above 1", topo1 + "expect:\n  success_ratio: \">= 99.9\"\n", []string{`x.yaml:5:18: expect.success_ratio: bad ratio "99.9" (want a number from 0 to 1, e.g. 0.999)`}},
		{"bad latency", topo1 + "expect:\n  latency_p99: <= fast\n", []string{`x.yaml:5:16: expect.latency_p99: bad duration "fast" (want e.g. 500ms or 15s)`}},
		{"bad count", topo1 + "expect:\n  routing_timeouts: == -1\n", []string{`x.yaml:5:21: expect.routing_timeouts: bad count "-1" (want a whole number, 0 or more)`}},
		{"recovery without fault", topo1 + "expect:\n  recovery: <= 1s\n", []string{"x.yaml:5:13: expect.recovery: recovery needs a fault to recover from"}},
		{"inflight without kill", topo1 + "expect:\n  max_failed: inflight_at_kill\n", []string{"x.yaml:5:15: expect.max_failed: inflight_at_kill needs a kill-kas or stop-kas fault"}},
		{"bad max_failed", topo1 + "expect:\n  max_failed: some\n", []string{`x.yaml:5:15: expect.max_failed: bad count "some" (want a whole number, 0 or more, or inflight_at_kill)`}},
		{"zero_failed false", topo1 + "expect:\n  zero_failed: false\n", []string{"x.yaml:5:16: expect.zero_failed: want true (leave the key out to allow failed calls)"}},
		{"unaffected without faults", topo3 + "expect:\n  unaffected: {zero_failed: true}\n", []string{"x.yaml:5:3: expect.unaffected: no fault selects agents, so every call is unaffected"}},
		{"unaffected every agent", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: link-down\nexpect:\n  unaffected: {zero_failed: true}\n",
			[]string{"x.yaml:9:3: expect.unaffected: the faults select every agent: no call is unaffected"}},
		{"unaffected key", topo3 + "faults:\n  - at: 1s\n    link: agent->kas\n    type: link-down\n    select: {count: 1}\nexpect:\n  unaffected: {recovery: <= 1s}\n",
			[]string{"x.yaml:10:16: expect.unaffected.recovery: unknown key (want success_ratio, latency_p50, latency_p90, latency_p99, max_failed, zero_failed)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain:\n%s", err, w)
				}
			}
			checkNamesFile(t, err, "x.yaml")
		})
	}
}

// checkNamesFile checks that every error in err is an *Error of file.
func checkNamesFile(t *testing.T, err error, file string) {
	t.Helper()
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	for _, e := range list {
		var se *Error
		if !errors.As(e, &se) || se.File != file || !strings.HasPrefix(e.Error(), file+":") {
			t.Errorf("%q (%T) does not name %s", e, e, file)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte("name: t\nload: {rate: 1, duration: 1h1m}\nexpect: {zero_failed: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path+":2:27: load.duration: 1h1m is out of range (want 1s to 1h0m0s)") {
		t.Errorf("Load: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, "missing.yaml")+": open ") {
		t.Errorf("Load of a missing file: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxFileSize)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "the file is larger than") {
		t.Errorf("Load of a large file: %v", err)
	}
}

func TestObjectiveMet(t *testing.T) {
	s, err := Parse("o.yaml", []byte("name: t\ntopology: {kas: 2}\nload: {rate: 1, duration: 30s}\nfaults:\n  - {at: 1s, process: kill-kas, select: {kas: 1}}\nexpect:\n  success_ratio: \">= 0.999\"\n  latency_p99: < 500ms\n  max_failed: inflight_at_kill\n"))
	if err != nil {
		t.Fatal(err)
	}
	ratio, p99, failed := s.Expect[0], s.Expect[1], s.Expect[2]
	for _, tc := range []struct {
		o      Objective
		actual float64
		want   bool
	}{
		{ratio, 0.999, true}, {ratio, 0.998, false}, {p99, 0.499, true}, {p99, 0.5, false},
	} {
		if got, err := tc.o.Met(tc.actual, nil); err != nil || got != tc.want {
			t.Errorf("%s with %v: %v, %v", tc.o, tc.actual, got, err)
		}
	}
	if p99.ThresholdDuration() != 500*time.Millisecond {
		t.Errorf("threshold %s", p99.ThresholdDuration())
	}
	if _, err := failed.Met(3, nil); err == nil || !strings.Contains(err.Error(), "inflight_at_kill was not measured") {
		t.Errorf("unmeasured ref: %v", err)
	}
	if got, _ := failed.Met(3, map[Ref]float64{RefInflightAtKill: 3}); !got {
		t.Error("3 failed calls with 3 in flight")
	}
	if got, _ := failed.Met(4, map[Ref]float64{RefInflightAtKill: 3}); got {
		t.Error("4 failed calls with 3 in flight")
	}
}
