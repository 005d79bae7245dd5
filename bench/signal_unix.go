//go:build unix

package bench

import "syscall"

// interrupt asks an agents process to stop gracefully.
var interrupt = syscall.SIGTERM
