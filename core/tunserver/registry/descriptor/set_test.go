package descriptor

import (
	"testing"

	"github.com/tunnelbench/tunnelbench/core/rpc"
)

func index(t *testing.T, reuse bool, methods ...string) Index {
	t.Helper()
	s := &rpc.Service{Name: "test.Svc"}
	for _, m := range methods {
		s.Methods = append(s.Methods, &rpc.Method{Name: m})
	}
	d, err := NewIndex(&rpc.AgentDescriptor{Services: []*rpc.Service{s}})
	if err != nil {
		t.Fatal(err)
	}
	d.Reuse = reuse
	return d
}

func wantSet(t *testing.T, s *Set, len int, supports map[string]bool) {
	t.Helper()
	if got := s.Len(); got != len {
		t.Fatalf("%d descriptors held, want %d", got, len)
	}
	for m, want := range supports {
		if got := s.Supports("test.Svc", m); got != want {
			t.Fatalf("Supports(%s) = %t, want %t", m, got, want)
		}
	}
}

// The same index (as agentapi's cache hands it to every tunnel that sent the same bytes) is held once
// and forgotten only when its last tunnel ends.
func TestSetCountsEachIndexOnce(t *testing.T) {
	var s Set
	wantSet(t, &s, 0, map[string]bool{"A": false})
	a := index(t, false, "A")
	s.Add(a)
	s.Add(a)
	b := index(t, false, "B")
	s.Add(b)
	wantSet(t, &s, 2, map[string]bool{"A": true, "B": true, "C": false})
	s.Remove(a)
	wantSet(t, &s, 2, map[string]bool{"A": true, "B": true})
	s.Remove(a)
	wantSet(t, &s, 1, map[string]bool{"A": false, "B": true})
	s.Remove(a) // not held: nothing changes
	wantSet(t, &s, 1, map[string]bool{"A": false, "B": true})
	s.Remove(b)
	wantSet(t, &s, 0, map[string]bool{"B": false})
}

// An index that differs in Reuse alone is another descriptor: it came from another first message.
func TestSetTellsReuseApart(t *testing.T) {
	var s Set
	single := index(t, false, "A")
	reusable := single
	reusable.Reuse = true
	s.Add(single)
	s.Add(reusable)
	wantSet(t, &s, 2, map[string]bool{"A": true})
	s.Remove(single)
	wantSet(t, &s, 1, map[string]bool{"A": true})
	s.Remove(reusable)
	wantSet(t, &s, 0, map[string]bool{"A": false})
}
