//go:build !unix

package bench

import "time"

// processCPU is zero where getrusage is not available: cases then record no CPU time per call.
func processCPU() time.Duration { return 0 }
