// Package testwait is the one way tests wait for a condition: by polling it
// with a deadline, never by sleeping and hoping (STYLE.md, Tests).
package testwait

import (
	"testing"
	"time"
)

// interval is how often For polls.
const interval = 10 * time.Millisecond

// For polls cond every 10ms until it holds, and fails the test with what
// when timeout passes first.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}
