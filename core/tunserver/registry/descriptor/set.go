package descriptor

import (
	"reflect"
	"slices"
)

// Set is the descriptors of one agent's tunnels, each once with how many of them sent it: an agent sends
// one descriptor on all its tunnels, two or so while it is upgraded. The zero Set is empty. It holds no
// lock: its owner guards it.
type Set struct {
	counts []count
}

type count struct {
	index Index
	n     int
}

// sameIndex reports whether two indexes are one: agentapi's descriptor cache hands every tunnel that
// sent the same bytes the same index, so that comparing its map is enough (and cheap). Two equal
// descriptors indexed apart count twice, which changes no answer of Supports.
func sameIndex(a, b Index) bool {
	return a.Reuse == b.Reuse && a.Batches == b.Batches && a.EndsOnRequest == b.EndsOnRequest && reflect.ValueOf(a.services).UnsafePointer() == reflect.ValueOf(b.services).UnsafePointer()
}

// Add counts the descriptor of a tunnel that joined.
func (s *Set) Add(d Index) {
	for i := range s.counts {
		if sameIndex(s.counts[i].index, d) {
			s.counts[i].n++
			return
		}
	}
	s.counts = append(s.counts, count{index: d, n: 1})
}

// Remove uncounts the descriptor of a tunnel that ended; a descriptor no tunnel holds any more is
// forgotten.
func (s *Set) Remove(d Index) {
	for i := range s.counts {
		if sameIndex(s.counts[i].index, d) {
			if s.counts[i].n--; s.counts[i].n == 0 {
				s.counts = slices.Delete(s.counts, i, i+1) // clears the tail: no index kept alive
			}
			return
		}
	}
}

// Supports reports whether any of the descriptors serves the method.
func (s *Set) Supports(service, method string) bool {
	for _, c := range s.counts {
		if c.index.Supports(service, method) {
			return true
		}
	}
	return false
}

// Len is the number of distinct descriptors held.
func (s *Set) Len() int { return len(s.counts) }
