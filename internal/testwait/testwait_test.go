package testwait

import (
	"strings"
	"testing"
	"time"
)

// fakeT records a Fatalf instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

func TestFor(t *testing.T) {
	n := 0
	For(t, time.Second, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
	ft := &fakeT{TB: t}
	func() {
		defer func() {
			if r := recover(); r != ft {
				panic(r)
			}
		}()
		Every(time.Millisecond).For(ft, 20*time.Millisecond, "never", func() bool { return false })
	}()
	if !strings.Contains(ft.failed, "timed out") {
		t.Fatalf("a condition that never holds failed with %q", ft.failed)
	}
}
