package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tunnelbench/tunnelbench/chaos"
)

func (p *parser) faults(e entry, topo Topology, topoOK bool, load Workload, loadOK bool) []Fault {
	if e.val.Kind != yaml.SequenceNode {
		if !(e.val.Kind == yaml.ScalarNode && e.val.Tag == "!!null") {
			p.errf(e.val, "faults", "want a list of faults")
		}
		return nil
	}
	var out []Fault
	for i, n := range e.val.Content {
		if f, ok := p.fault(n, fmt.Sprintf("faults[%d]", i), topo, topoOK, load, loadOK); ok {
			out = append(out, f)
		}
	}
	return out
}

func (p *parser) fault(n *yaml.Node, path string, topo Topology, topoOK bool, load Workload, loadOK bool) (Fault, bool) {
	m, ok := p.fields(n, path, "at", "for", "link", "process", "type", "params", "select", "deadline")
	if !ok {
		return Fault{}, false
	}
	errs := len(p.errs)
	f := Fault{Line: n.Line, Deadline: chaos.DefaultChangeDeadline}
	if _, ok := m["at"]; !ok {
		p.errf(n, join(path, "at"), "required: when the fault starts, from the start of the load")
	}
	f.At = p.duration(m, "at", path, 0, 0, MaxDuration)
	f.For = p.duration(m, "for", path, 0, time.Millisecond, MaxDuration)
	f.Deadline = p.duration(m, "deadline", path, chaos.DefaultChangeDeadline, time.Millisecond, MaxDuration)
	var paramsBad map[string]bool
	f.Params, paramsBad = p.params(m, path)
	selErrs := len(p.errs)
	f.Select = p.selection(m, path, topo, topoOK)
	// A select that could not be read must not also be reported as missing or as too large for the
	// topology: one mistake, one error.
	selOK := len(p.errs) == selErrs

	le, isLink := m["link"]
	pe, isProcess := m["process"]
	switch {
	case isLink && isProcess:
		p.errf(pe.key, join(path, "process"), "a fault is on a link or a process, not both")
	case isLink:
		p.linkFault(&f, m, le, path, topo, topoOK, selOK, paramsBad)
	case isProcess:
		p.processFault(&f, m, pe, path, topo, topoOK, selOK, paramsBad)
	default:
		p.errf(n, path, "a fault needs link (with type) or process")
	}

	if loadOK && load.Duration > 0 {
		if e, ok := m["at"]; ok && f.At >= load.Duration {
			p.errf(e.val, join(path, "at"), "%s is not within the load duration %s", f.At, load.Duration)
		} else if e, ok := m["for"]; ok && f.At+f.For > load.Duration {
			p.errf(e.val, join(path, "for"), "the fault would end at %s, after the load (duration %s)", f.At+f.For, load.Duration)
		}
		if r, ok := f.Process.(*chaos.RestartAgents); ok && topoOK && selOK && len(p.errs) == errs {
			n := f.Select.N(topo.Agents)
			if len(f.Select.Agents) > 0 {
				n = len(f.Select.Agents)
			}
			span := r.Span(n)
			if _, set := m["deadline"]; !set {
				f.Deadline += span
			}
			if f.At+span > load.Duration {
				p.errf(pe.val, join(path, "process"), "restarting %d agents %s apart takes %s: it would end at %s, after the load (duration %s)", n, r.Interval, span, f.At+span, load.Duration)
			}
		}
	}
	return f, len(p.errs) == errs
}

func (p *parser) linkFault(f *Fault, m map[string]entry, le entry, path string, topo Topology, topoOK, selOK bool, paramsBad map[string]bool) {
	kp := join(path, "link")
	v, ok := p.scalar(le, kp)
	if !ok {
		return
	}
	link, err := chaos.ParseLink(v)
	if err != nil {
		p.errf(le.val, kp, "%v", err)
		return
	}
	f.Link = link
	if topoOK {
		switch {
		case link == chaos.LinkKasKas && topo.Kas < 2:
			p.errf(le.val, kp, "the topology has no kas->kas link: it needs at least 2 kas (it has %d)", topo.Kas)
		case link == chaos.LinkKasRedis && topo.Tracker != TrackerRedis:
			p.errf(le.val, kp, "the topology has no kas->redis link: it needs tracker: redis (it uses %s)", topo.Tracker)
		}
		if selOK {
			p.checkLinkSelect(f, m, path, topo)
		}
	}
	te, ok := m["type"]
	if !ok {
		p.errf(le.key, join(path, "type"), "required with link (one of %s)", strings.Join(chaos.FaultTypes(), ", "))
		return
	}
	typ, ok := p.scalar(te, join(path, "type"))
	if !ok {
		return
	}
	f.Type = typ
	if slices.Contains(chaos.ProcessTypes(), typ) {
		p.errf(te.val, join(path, "type"), "%s is a process fault: write process: %s, without link and type", typ, typ)
		return
	}
	fault, err := chaos.NewFault(typ, f.Params)
	if err != nil {
		p.paramErrors(err, m, te, path, paramsBad)
		return
	}
	f.Network = fault
}

func (p *parser) processFault(f *Fault, m map[string]entry, pe entry, path string, topo Topology, topoOK, selOK bool, paramsBad map[string]bool) {
	kp := join(path, "process")
	typ, ok := p.scalar(pe, kp)
	if !ok {
		return
	}
	if te, ok := m["type"]; ok {
		p.errf(te.key, join(path, "type"), "type is for link faults; a process fault is named by process")
	}
	f.Type = typ
	if slices.Contains(chaos.FaultTypes(), typ) {
		p.errf(pe.val, kp, "%s is a link fault: write link: LINK and type: %s", typ, typ)
		return
	}
	proc, err := chaos.NewProcess(typ, f.Params)
	if err != nil {
		p.paramErrors(err, m, pe, path, paramsBad)
		return
	}
	f.Process = proc
	if fe, ok := m["for"]; ok && !proc.Reversible() {
		p.errf(fe.key, join(path, "for"), "%s cannot be undone, so it takes no for", typ)
	}
	if (typ == "stop-redis" || typ == "start-redis") && topoOK && topo.Tracker != TrackerRedis {
		p.errf(pe.val, kp, "%s needs tracker: redis (the topology uses %s)", typ, topo.Tracker)
	}
	se, hasSelect := m["select"]
	sel := f.Select
	if !selOK {
		return
	}
	switch proc.Selects() {
	case chaos.SelectsNothing:
		if hasSelect {
			p.errf(se.key, join(path, "select"), "%s takes no select", typ)
		}
	case chaos.SelectsKas:
		switch {
		case !hasSelect || sel.IsZero():
			p.errf(pe.val, kp, "%s needs select: kas (indices), count or fraction", typ)
		case len(sel.Agents) > 0:
			p.errf(se.val, join(path, "select"), "%s selects kas, not agents", typ)
		case topoOK && sel.N(topo.Kas) >= topo.Kas && len(sel.Kas) == 0 || topoOK && len(sel.Kas) >= topo.Kas:
			p.errf(se.val, join(path, "select"), "%s would leave no kas running (the topology has %d)", typ, topo.Kas)
		case topoOK && sel.Count > topo.Kas:
			p.errf(se.val, join(path, "select.count"), "count %d is more than the %d kas", sel.Count, topo.Kas)
		}
	case chaos.SelectsAgents:
		switch {
		case len(sel.Kas) > 0:
			p.errf(se.val, join(path, "select"), "%s selects agents, not kas", typ)
		case topoOK && sel.Count > topo.Agents:
			p.errf(se.val, join(path, "select.count"), "count %d is more than the %d agents", sel.Count, topo.Agents)
		}
	}
}

// checkLinkSelect checks a link fault's selection against the link's instances.
func (p *parser) checkLinkSelect(f *Fault, m map[string]entry, path string, topo Topology) {
	se, ok := m["select"]
	if !ok {
		return
	}
	sel := f.Select
	instances, what := topo.Kas, "kas"
	if f.Link == chaos.LinkAgentKas {
		instances, what = topo.Agents, "agents"
	}
	switch {
	case len(sel.Agents) > 0 && f.Link != chaos.LinkAgentKas:
		p.errf(se.val, join(path, "select"), "agents select proxies of the agent->kas link only; %s has one proxy per kas", f.Link)
	case sel.Count > instances:
		p.errf(se.val, join(path, "select.count"), "count %d is more than the %d %s of %s", sel.Count, instances, what, f.Link)
	}
}

// paramErrors reports the errors of chaos.NewFault or NewProcess at the line of the param they
// are about, or of the type when they are about no param. Errors about params that could not be read
// (bad, or every param when params is not a mapping) were reported already: the fault type would
// only call them missing.
func (p *parser) paramErrors(err error, m map[string]entry, typ entry, path string, bad map[string]bool) {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	params, hasParams := m["params"]
	for _, e := range list {
		var pe *chaos.ParamError
		if !errors.As(e, &pe) || pe.Key == "" {
			p.errf(typ.val, join(path, typ.key.Value), "%v", e)
			continue
		}
		if bad[pe.Key] || bad[allParams] {
			continue
		}
		kp := join(path, "params."+pe.Key)
		if hasParams && params.val.Kind == yaml.MappingNode {
			if n := valueOf(params.val, pe.Key); n != nil {
				p.errf(n, kp, "%v", pe.Err)
				continue
			}
			p.errf(params.key, kp, "%v", pe.Err)
			continue
		}
		p.errf(typ.val, kp, "%v", pe.Err)
	}
}

func valueOf(mapping *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(mapping.Content); i += 2 {
		if mapping.Content[i].Value == key {
			return mapping.Content[i+1]
		}
	}
	return nil
}

// allParams in the bad set of params means that none could be read.
const allParams = "*"

// params reads a mapping of scalar values; the fault type checks the keys. bad holds the keys whose
// value could not be read (reported here), or allParams.
func (p *parser) params(m map[string]entry, path string) (params chaos.Params, bad map[string]bool) {
	e, ok := m["params"]
	if !ok {
		return nil, nil
	}
	kp := join(path, "params")
	bad = map[string]bool{}
	if e.val.Kind != yaml.MappingNode {
		p.errf(e.val, kp, "want a mapping of parameters, e.g. {latency: 100ms}")
		bad[allParams] = true
		return nil, bad
	}
	out := chaos.Params{}
	for i := 0; i+1 < len(e.val.Content); i += 2 {
		k, v := e.val.Content[i], e.val.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errf(k, kp, "keys must be plain words")
			bad[allParams] = true
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.errf(k, join(kp, k.Value), "duplicate key")
			continue
		}
		if val, ok := p.scalar(entry{k, v}, join(kp, k.Value)); ok {
			out[k.Value] = val
		} else {
			bad[k.Value] = true
		}
	}
	return out, bad
}

// selection reads select: {count | fraction | kas | agents}.
func (p *parser) selection(m map[string]entry, path string, topo Topology, topoOK bool) chaos.Select {
	var s chaos.Select
	e, ok := m["select"]
	if !ok {
		return s
	}
	kp := join(path, "select")
	sm, ok := p.fields(e.val, kp, "count", "fraction", "kas", "agents")
	if !ok {
		return s
	}
	if len(sm) == 0 {
		p.errf(e.val, kp, "empty: leave select out to pick every instance")
	}
	if len(sm) > 1 {
		p.errf(e.val, kp, "set one of count, fraction, kas and agents")
		return s
	}
	s.Count = p.integer(sm, "count", kp, 0, 1, MaxAgents)
	if fe, ok := sm["fraction"]; ok {
		if v, ok := p.scalar(fe, join(kp, "fraction")); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 1) {
				p.errf(fe.val, join(kp, "fraction"), "bad fraction %q (want a number above 0 and at most 1)", v)
			} else {
				s.Fraction = f
			}
		}
	}
	if ke, ok := sm["kas"]; ok {
		for _, item := range p.list(ke, join(kp, "kas")) {
			k, err := strconv.Atoi(item.Value)
			switch {
			case err != nil:
				p.errf(item, join(kp, "kas"), "bad kas index %q (want a whole number from 0)", item.Value)
			case k < 0 || topoOK && k >= topo.Kas:
				p.errf(item, join(kp, "kas"), "no kas %d (the topology has kas 0..%d)", k, topo.Kas-1)
			case slices.Contains(s.Kas, k):
				p.errf(item, join(kp, "kas"), "kas %d is listed twice", k)
			default:
				s.Kas = append(s.Kas, k)
			}
		}
	}
	if ae, ok := sm["agents"]; ok {
		seen := make(map[int64]bool)
		for _, item := range p.list(ae, join(kp, "agents")) {
			lo, hi, err := agentRange(item.Value)
			switch {
			case err != nil:
				p.errf(item, join(kp, "agents"), "%v", err)
			case topoOK && hi > int64(topo.Agents):
				p.errf(item, join(kp, "agents"), "no agent %d (the topology has agents 1..%d)", hi, topo.Agents)
			case hi-lo >= MaxAgents || len(s.Agents) > MaxAgents:
				p.errf(item, join(kp, "agents"), "range %q is too large", item.Value)
			default:
				for id := lo; id <= hi; id++ {
					if seen[id] {
						p.errf(item, join(kp, "agents"), "agent %d is listed twice", id)
						break
					}
					seen[id] = true
					s.Agents = append(s.Agents, id)
				}
			}
		}
	}
	return s
}

// list returns the scalar items of a value that is one scalar or a list of scalars.
func (p *parser) list(e entry, path string) []*yaml.Node {
	switch {
	case e.val.Kind == yaml.ScalarNode && e.val.Tag != "!!null":
		return []*yaml.Node{e.val}
	case e.val.Kind == yaml.SequenceNode && len(e.val.Content) > 0:
		var out []*yaml.Node
		for _, item := range e.val.Content {
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				p.errf(item, path, "want a single value")
				continue
			}
			out = append(out, item)
		}
		return out
	}
	p.errf(e.val, path, "want a value or a list of values")
	return nil
}

// agentRange parses an agent id (7) or an inclusive range of ids ("1..5").
func agentRange(s string) (lo, hi int64, err error) {
	a, b, isRange := strings.Cut(s, "..")
	if !isRange {
		b = a
	}
	lo, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	hi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if err1 != nil || err2 != nil || lo < 1 || hi < lo {
		return 0, 0, fmt.Errorf("bad agent %q (want an id from 1, or a range such as \"1..5\")", s)
	}
	return lo, hi, nil
}
