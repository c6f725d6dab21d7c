package testbed

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortsBelowEphemeral: the ports are distinct across calls, below
// the ephemeral range, and bindable.
func TestFreePortsBelowEphemeral(t *testing.T) {
	seen := map[int]bool{}
	for range 3 {
		ps, err := freePorts(20)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			if low := ephemeralLow(); p >= low || p < low-portSpan {
				t.Fatalf("port %d outside [%d, %d)", p, low-portSpan, low)
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d: %v", p, err)
			}
			l.Close()
		}
	}
}
