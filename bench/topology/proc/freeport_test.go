package proc

import (
	"net"
	"strconv"
	"testing"
)

// Picked ports are free, never handed out twice, and below the kernel's ephemeral range where it can be
// read, so that no outgoing connection takes one before its process listens.
func TestFreePortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		if low-minPickedPort >= 1024 && (port < minPickedPort || port >= low) {
			t.Fatalf("port %d outside [%d, %d)", port, minPickedPort, low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", port, err)
		}
		_ = l.Close()
	}
}
