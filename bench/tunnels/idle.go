package tunnels

import (
	"runtime"
	"time"
)

// DefaultIdleAgents is how many agents a run should connect to measure idle cost: enough that one
// agent's share stands clear of what the rest of the process's heap does meanwhile (it moved by up to
// 0.5 MiB in the tests' runs; direct gRPC's agent is 3 KiB), and about a second to connect for each
// adapter here.
const DefaultIdleAgents = 1000

// IdleCost is what connected, idle agents cost, per agent: both ends of the tunnel together, since
// the server side and the agents share this process. Every adapter is measured by Start the same way
// (bench's scale case measures kas the same way): the difference between the server started alone and
// the server with every agent connected, each taken once the heap has settled (see snapshot).
type IdleCost struct {
	Agents             int     `json:"agents"`
	HeapBytesPerAgent  float64 `json:"heap_bytes_per_agent"`
	StackBytesPerAgent float64 `json:"stack_bytes_per_agent"`
	GoroutinesPerAgent float64 `json:"goroutines_per_agent"`
}

// MemSnapshot is the process's live heap, goroutine stacks and goroutines.
type MemSnapshot struct {
	Heap, Stack uint64
	Goroutines  int
}

// Settling the heap before a snapshot.
const (
	maxSettleGCs = 10
	// settlePause lets finalizers and cleanups that a collection queued run before the next one.
	settlePause = time.Millisecond
)

// Snapshot collects garbage until the live heap stops shrinking (what a collection finds unreachable
// but with a finalizer or cleanup is freed only by a later one, after that has run), then reads it.
func Snapshot() MemSnapshot {
	var m runtime.MemStats
	prev := ^uint64(0)
	for range maxSettleGCs {
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.HeapAlloc >= prev {
			break
		}
		prev = m.HeapAlloc
		time.Sleep(settlePause)
	}
	return MemSnapshot{Heap: m.HeapAlloc, Stack: m.StackInuse, Goroutines: runtime.NumGoroutine()}
}

// idleCost divides what changed from before to after by agents.
func idleCost(before, after MemSnapshot, agents int) IdleCost {
	n := float64(agents)
	return IdleCost{
		Agents:             agents,
		HeapBytesPerAgent:  float64(int64(after.Heap)-int64(before.Heap)) / n,
		StackBytesPerAgent: float64(int64(after.Stack)-int64(before.Stack)) / n,
		GoroutinesPerAgent: float64(after.Goroutines-before.Goroutines) / n,
	}
}
