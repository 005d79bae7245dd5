package proc

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// A port found free can be taken by another socket before the process it is for listens on it. The
// kernel gives the local ports of outgoing connections, and of listeners on port 0, from its ephemeral
// range, and parallel tests open many of those: freePort picks a port below that range when the range
// leaves room, where only another pick like it could collide, and never hands out one port twice in
// this process.

// minPickedPort keeps picks above the ports that services on a development machine commonly use.
const minPickedPort = 10000

var picked = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	if low := ephemeralLow(); low-minPickedPort >= 1024 {
		picked.Lock()
		defer picked.Unlock()
		for range 100 {
			port := minPickedPort + rand.IntN(low-minPickedPort)
			if picked.ports[port] {
				continue
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue
			}
			_ = l.Close()
			picked.ports[port] = true
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}
