package tunnels

import "runtime"

// IdleCost is what connected, idle agents cost, per agent: both ends of the tunnel together, since
// the server side and the agents share this process. Every adapter is measured by Start the same way
// (bench's scale case measures kas the same way): the difference between the server started alone and
// the server with every agent connected, after two garbage collections.
type IdleCost struct {
	Agents             int     `json:"agents"`
	HeapBytesPerAgent  float64 `json:"heap_bytes_per_agent"`
	StackBytesPerAgent float64 `json:"stack_bytes_per_agent"`
	GoroutinesPerAgent float64 `json:"goroutines_per_agent"`
}

// memSnapshot is the process's live heap, goroutine stacks and goroutines.
type memSnapshot struct {
	heap, stack uint64
	goroutines  int
}

func snapshot() memSnapshot {
	// Twice: the first collection's finalizers and swept spans settle in the second.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSnapshot{heap: m.HeapAlloc, stack: m.StackInuse, goroutines: runtime.NumGoroutine()}
}

// idleCost divides what changed from before to after by agents.
func idleCost(before, after memSnapshot, agents int) IdleCost {
	n := float64(agents)
	return IdleCost{
		Agents:             agents,
		HeapBytesPerAgent:  float64(int64(after.heap)-int64(before.heap)) / n,
		StackBytesPerAgent: float64(int64(after.stack)-int64(before.stack)) / n,
		GoroutinesPerAgent: float64(after.goroutines-before.goroutines) / n,
	}
}
