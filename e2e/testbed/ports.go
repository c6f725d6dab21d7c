package testbed

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The loopback bed's listeners get ports below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range): a port picked from inside it could become
// the local port of some outgoing connection (a starting broker dials its
// controllers) between the check and the JVM's bind, which then fails with
// "Address already in use". Below the range only listeners take ports.
const portSpan = 12000 // ports tried: [low-portSpan, low)

var ports struct {
	mu   sync.Mutex
	next int // the next port to try; 0 until first use
	low  int // the first ephemeral port
}

// freePorts returns n distinct ports that are free on 127.0.0.1 now, below
// the ephemeral range. One test binary never gets a port twice; separate
// binaries start at random places in the span, and the bind check skips
// ports another process holds.
func freePorts(n int) ([]int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.next == 0 {
		ports.low = ephemeralLow()
		ports.next = ports.low - portSpan + rand.IntN(portSpan)
	}
	out := make([]int, 0, n)
	for tried := 0; len(out) < n; tried++ {
		if tried == portSpan {
			return nil, fmt.Errorf("testbed: no %d free ports below %d on 127.0.0.1", n, ports.low)
		}
		p := ports.next
		if ports.next++; ports.next >= ports.low {
			ports.next = ports.low - portSpan
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		out = append(out, p)
	}
	return out, nil
}

// ephemeralLow returns the first port of the ephemeral range, Linux's
// default 32768 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= portSpan+1024 {
		return 32768
	}
	return low
}
