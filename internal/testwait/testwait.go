// Package testwait is the one way tests wait for a condition: by polling it
// with a deadline, never by sleeping and hoping (STYLE.md, Tests).
package testwait

import (
	"testing"
	"time"
)

// Poller polls a condition at a fixed interval.
type Poller struct{ interval time.Duration }

// Every returns a Poller that polls every interval: tests whose condition
// asks a real Kafka cluster poll less often than the default.
func Every(interval time.Duration) Poller { return Poller{interval: interval} }

// For polls cond every 10ms until it holds, and fails the test with what
// when timeout passes first.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Every(10*time.Millisecond).For(t, timeout, what, cond)
}

// For polls cond until it holds, and fails the test with what when timeout
// passes first.
func (p Poller) For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(p.interval)
	}
}
