package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
)

// toxic is the part of a fault made of toxiproxy toxics: one per stream of its direction, named
// after the fault value so that several faults of one type can share a proxy.
type toxic struct {
	typ   string // toxiproxy's type name
	id    uint64
	dir   Direction
	attrs any // toxiproxy's attributes, JSON-encoded
}

var toxicSeq atomic.Uint64

func newToxic(typ string, dir Direction, attrs any) toxic {
	return toxic{typ: typ, id: toxicSeq.Add(1), dir: dir, attrs: attrs}
}

func (t *toxic) name(stream string) string { return fmt.Sprintf("chaos-%d-%s-%s", t.id, t.typ, stream) }

// apply adds one toxic per stream; when one fails, the ones added are removed again.
func (t *toxic) apply(ctx context.Context, p *Proxy) error {
	if t.typ == "" {
		return errUnbuilt
	}
	var added []string
	for _, s := range t.dir.streams() {
		body, err := json.Marshal(struct {
			Name       string  `json:"name"`
			Type       string  `json:"type"`
			Stream     string  `json:"stream"`
			Toxicity   float32 `json:"toxicity"`
			Attributes any     `json:"attributes"`
		}{t.name(s), t.typ, s, 1, t.attrs})
		if err == nil {
			_, err = p.p.Toxics.AddToxicJson(bytes.NewReader(body))
		}
		if err != nil {
			err = fmt.Errorf("add toxic %s %s: %w", t.typ, s, err)
			for _, name := range added {
				if rerr := p.p.Toxics.RemoveToxic(ctx, name); rerr != nil {
					err = errors.Join(err, fmt.Errorf("remove toxic %s again: %w", name, rerr))
				}
			}
			return err
		}
		added = append(added, t.name(s))
	}
	return nil
}

// remove removes the toxic of every stream; a missing toxic is an error.
func (t *toxic) remove(ctx context.Context, p *Proxy) error {
	if t.typ == "" {
		return errUnbuilt
	}
	var errs []error
	for _, s := range t.dir.streams() {
		if err := p.p.Toxics.RemoveToxic(ctx, t.name(s)); err != nil {
			errs = append(errs, fmt.Errorf("remove toxic %s %s: %w", t.typ, s, err))
		}
	}
	return errors.Join(errs...)
}

// errUnbuilt is what a fault value built without NewFault returns.
var errUnbuilt = errors.New("fault not built by NewFault")
