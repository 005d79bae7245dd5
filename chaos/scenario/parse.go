package scenario

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tunnelbench/tunnelbench/chaos"
)

// Error is one problem in a scenario file.
type Error struct {
	File   string
	Line   int // 0 when the problem is with the whole file
	Column int
	// Key is the path of the key the problem is with ("faults[1].params.latency"); may be empty.
	Key string
	Msg string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and checks the scenario file at path. Every problem is an *Error, joined with
// errors.Join, in the order of the file.
func Load(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return Parse(path, data)
}

// Parse checks the scenario in data; name is the file name errors carry.
func Parse(name string, data []byte) (s *Scenario, err error) {
	if len(data) > MaxFileSize {
		return nil, &Error{File: name, Msg: fmt.Sprintf("the file is larger than %d bytes", MaxFileSize)}
	}
	root, err := decode(name, data)
	if err != nil {
		return nil, err
	}
	p := &parser{file: name, data: data}
	s = p.scenario(root)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
		})
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	s.File = name
	return s, nil
}

var (
	yamlLine   = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	foldedHint = regexp.MustCompile(`:\s+>`)
)

// decode parses exactly one YAML document whose root is a mapping, without anchors or aliases.
func decode(name string, data []byte) (root *yaml.Node, err error) {
	defer func() {
		// The YAML library must not take the process down on a hostile file.
		if r := recover(); r != nil {
			root, err = nil, &Error{File: name, Msg: fmt.Sprintf("unreadable YAML (%v)", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &Error{File: name, Msg: "the file is empty"}
		}
		return nil, yamlError(name, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, yamlError(name, data, err)
		}
		return nil, &Error{File: name, Line: extra.Line, Column: extra.Column, Msg: "only one YAML document per file"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{File: name, Msg: "the file is empty"}
	}
	root = doc.Content[0]
	if err := noAliases(name, root, 0); err != nil {
		return nil, err
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: name, Line: root.Line, Column: root.Column, Msg: "a scenario is a mapping of keys (name, topology, load, faults, expect)"}
	}
	return root, nil
}

func yamlError(name string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{File: name, Msg: msg}
	}
	line, _ := strconv.Atoi(m[1])
	msg = m[2]
	if lines := bytes.Split(data, []byte("\n")); line >= 1 && line <= len(lines) && foldedHint.Match(lines[line-1]) {
		msg += ` (quote objectives that start with ">", e.g. ">= 0.999")`
	}
	return &Error{File: name, Line: line, Column: 1, Msg: msg}
}

// maxDepth bounds nesting; no scenario needs more than a few levels.
const maxDepth = 32

func noAliases(name string, n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return &Error{File: name, Line: n.Line, Column: n.Column, Msg: "nested too deep"}
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return &Error{File: name, Line: n.Line, Column: n.Column, Msg: "anchors and aliases are not supported"}
	}
	for _, c := range n.Content {
		if err := noAliases(name, c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// parser walks the node tree and collects every problem.
type parser struct {
	file string
	data []byte
	errs []*Error
}

func (p *parser) errf(n *yaml.Node, key, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: n.Line, Column: n.Column, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// entry is one key of a mapping.
type entry struct {
	key, val *yaml.Node
}

// fields returns the entries of mapping n (at path) whose keys are known; unknown and duplicate keys
// are errors. ok is false when n is not a mapping.
func (p *parser) fields(n *yaml.Node, path string, known ...string) (map[string]entry, bool) {
	if n.Kind != yaml.MappingNode {
		p.errf(n, path, "want a mapping with keys %s", strings.Join(known, ", "))
		return nil, false
	}
	out := make(map[string]entry)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errf(k, path, "keys must be plain words")
			continue
		}
		kp := join(path, k.Value)
		if !slices.Contains(known, k.Value) {
			p.errf(k, kp, "unknown key (want %s)", strings.Join(known, ", "))
			continue
		}
		if prev, dup := out[k.Value]; dup {
			p.errf(k, kp, "duplicate key (first at line %d)", prev.key.Line)
			continue
		}
		out[k.Value] = entry{k, v}
	}
	return out, true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// scalar returns the text of a scalar value; null, sequences and mappings are errors.
func (p *parser) scalar(e entry, path string) (string, bool) {
	switch {
	case e.val.Kind != yaml.ScalarNode:
		p.errf(e.val, path, "want a single value, not a list or mapping")
	case e.val.Tag == "!!null":
		p.errf(e.key, path, "missing value")
	default:
		return e.val.Value, true
	}
	return "", false
}

func (p *parser) str(m map[string]entry, key, path string, def string) string {
	e, ok := m[key]
	if !ok {
		return def
	}
	v, _ := p.scalar(e, join(path, key))
	return v
}

// integer reads a whole number in [lo, hi].
func (p *parser) integer(m map[string]entry, key, path string, def, lo, hi int) int {
	e, ok := m[key]
	if !ok {
		return def
	}
	kp := join(path, key)
	v, ok := p.scalar(e, kp)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		p.errf(e.val, kp, "bad number %q (want a whole number)", v)
	case n < lo || n > hi:
		p.errf(e.val, kp, "%d is out of range (want %d to %d)", n, lo, hi)
	default:
		return n
	}
	return def
}

// duration reads a duration in [lo, hi]; required when def < 0.
func (p *parser) duration(m map[string]entry, key, path string, def, lo, hi time.Duration) time.Duration {
	e, ok := m[key]
	kp := join(path, key)
	if !ok {
		return def
	}
	v, ok := p.scalar(e, kp)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		p.errf(e.val, kp, "bad duration %q (want e.g. 500ms, 10s or 1m)", v)
	case d < lo || d > hi:
		if lo == 0 && d < 0 {
			p.errf(e.val, kp, "must not be negative, got %s", v)
		} else {
			p.errf(e.val, kp, "%s is out of range (want %s to %s)", v, lo, hi)
		}
	default:
		return d
	}
	return def
}

// oneOf reads a value from a fixed set.
func (p *parser) oneOf(m map[string]entry, key, path, def string, allowed ...string) string {
	e, ok := m[key]
	if !ok {
		return def
	}
	kp := join(path, key)
	v, ok := p.scalar(e, kp)
	if !ok {
		return def
	}
	if !slices.Contains(allowed, v) {
		p.errf(e.val, kp, "unknown value %q (want %s)", v, strings.Join(allowed, ", "))
		return def
	}
	return v
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

func (p *parser) scenario(root *yaml.Node) *Scenario {
	m, _ := p.fields(root, "", "name", "description", "topology", "load", "faults", "expect")
	s := &Scenario{}
	if e, ok := m["name"]; !ok {
		p.errf(root, "name", "required")
	} else if v, ok := p.scalar(e, "name"); ok {
		if !nameRE.MatchString(v) {
			p.errf(e.val, "name", "%q: want lower-case letters, digits and dashes (at most 64)", v)
		}
		s.Name = v
	}
	s.Description = p.str(m, "description", "", "")
	topo, topoOK := p.topology(m)
	s.Topology = topo
	load, loadOK := p.load(m, root, topo, topoOK)
	s.Load = load
	if e, ok := m["faults"]; ok {
		s.Faults = p.faults(e, topo, topoOK, load, loadOK)
	}
	if e, ok := m["expect"]; !ok {
		p.errf(root, "expect", "required: at least one objective")
	} else {
		s.Expect = p.expect(e.val, "expect", ScopeAll, s)
		if e.val.Kind == yaml.MappingNode && len(e.val.Content) == 0 {
			p.errf(e.key, "expect", "at least one objective is required")
		}
	}
	return s
}

// topology reads the topology; ok is false when it has a problem later checks depend on.
func (p *parser) topology(root map[string]entry) (Topology, bool) {
	t := Topology{
		Kas: DefaultKas, Agents: DefaultAgents, TunnelsPerAgent: DefaultTunnelsPerAgent,
		MaxConnectionAge: DefaultMaxConnectionAge, FindTimeout: DefaultFindTimeout, Tracker: DefaultTracker,
	}
	e, ok := root["topology"]
	if !ok {
		return t, true
	}
	n := len(p.errs)
	m, ok := p.fields(e.val, "topology", "kas", "agents", "tunnels_per_agent", "max_connection_age", "find_timeout", "tracker")
	if !ok {
		return t, false
	}
	const path = "topology"
	t.Kas = p.integer(m, "kas", path, DefaultKas, 1, MaxKas)
	t.Agents = p.integer(m, "agents", path, DefaultAgents, 1, MaxAgents)
	t.TunnelsPerAgent = p.integer(m, "tunnels_per_agent", path, DefaultTunnelsPerAgent, 1, MaxTunnelsPerAgent)
	t.MaxConnectionAge = p.duration(m, "max_connection_age", path, DefaultMaxConnectionAge, 0, MaxDuration)
	if t.MaxConnectionAge > 0 && t.MaxConnectionAge < MinMaxConnectionAge {
		p.errf(m["max_connection_age"].val, "topology.max_connection_age", "%s is too short (want 0 for never, or at least %s)", t.MaxConnectionAge, MinMaxConnectionAge)
	}
	t.FindTimeout = p.duration(m, "find_timeout", path, DefaultFindTimeout, time.Millisecond, MaxDuration)
	t.Tracker = Tracker(p.oneOf(m, "tracker", path, string(DefaultTracker), string(TrackerMemory), string(TrackerRedis)))
	return t, len(p.errs) == n
}

func (p *parser) load(root map[string]entry, rootNode *yaml.Node, topo Topology, topoOK bool) (Workload, bool) {
	l := Workload{Shape: DefaultShape, Payload: DefaultPayload, CallTimeout: DefaultCallTimeout, Entry: DefaultEntry, Targets: DefaultTargets}
	e, ok := root["load"]
	if !ok {
		p.errf(rootNode, "load", "required (shape, rate or workers, duration, ...)")
		return l, false
	}
	n := len(p.errs)
	m, ok := p.fields(e.val, "load", "shape", "payload", "rate", "workers", "duration", "call_timeout", "entry", "targets")
	if !ok {
		return l, false
	}
	const path = "load"
	l.Shape = p.oneOf(m, "shape", path, DefaultShape, Shapes...)
	if pe, ok := m["payload"]; ok {
		if v, ok := p.scalar(pe, "load.payload"); ok {
			size, err := chaos.ParseSize(v)
			switch {
			case err != nil:
				p.errf(pe.val, "load.payload", "%v", err)
			case size > MaxPayload:
				p.errf(pe.val, "load.payload", "%s is more than the largest message, %d bytes", v, MaxPayload)
			default:
				l.Payload = int(size)
			}
		}
	}
	re, hasRate := m["rate"]
	_, hasWorkers := m["workers"]
	switch {
	case hasRate && hasWorkers:
		p.errf(re.key, "load.rate", "set rate (open loop) or workers (closed loop), not both")
	case !hasRate && !hasWorkers:
		p.errf(e.key, "load", "rate (calls per second) or workers is required")
	case hasRate:
		if v, ok := p.scalar(re, "load.rate"); ok {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || !(r > 0 && r <= 1e6) {
				p.errf(re.val, "load.rate", "bad rate %q (want calls per second, above 0 and at most 1000000)", v)
			} else {
				l.Rate = r
			}
		}
	default:
		l.Workers = p.integer(m, "workers", path, 0, 1, 10000)
	}
	if _, ok := m["duration"]; !ok {
		p.errf(e.key, "load.duration", "required")
	}
	l.Duration = p.duration(m, "duration", path, 0, time.Second, MaxDuration)
	l.CallTimeout = p.duration(m, "call_timeout", path, DefaultCallTimeout, time.Millisecond, MaxDuration)
	if ee, ok := m["entry"]; ok {
		if v, ok := p.scalar(ee, "load.entry"); ok && v != "all" {
			k, err := strconv.Atoi(v)
			switch {
			case err != nil:
				p.errf(ee.val, "load.entry", "bad entry %q (want all or a kas index)", v)
			case k < 0 || topoOK && k >= topo.Kas:
				p.errf(ee.val, "load.entry", "no kas %d (the topology has kas 0..%d)", k, topo.Kas-1)
			default:
				l.Entry = k
			}
		}
	}
	l.Targets = Targets(p.oneOf(m, "targets", path, string(DefaultTargets), string(TargetsAll), string(TargetsLocal), string(TargetsRemote)))
	if te, ok := m["targets"]; ok && l.Targets != TargetsAll {
		if _, hasEntry := m["entry"]; !hasEntry || l.Entry == EntryAll {
			p.errf(te.val, "load.targets", "%s agents are relative to one kas: set entry to a kas index", l.Targets)
		}
		if l.Targets == TargetsRemote && topoOK && topo.Kas < 2 {
			p.errf(te.val, "load.targets", "remote agents need at least 2 kas (the topology has %d)", topo.Kas)
		} else if topoOK && l.Entry != EntryAll && len(l.TargetAgents(topo)) == 0 {
			p.errf(te.val, "load.targets", "no agent is %s to kas %d", l.Targets, l.Entry)
		}
	}
	return l, len(p.errs) == n
}
