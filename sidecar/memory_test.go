package sidecar

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/sidemirror/sidemirror/fetcher"
)

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		buffer, want int64
	}{
		{fetcher.DefaultBufferMemory, 448 << 20},
		{minBufferMemory, minMemoryLimit},
		{1 << 30, 3<<30 + 64<<20},
		{math.MaxInt64 / 2, math.MaxInt64},
	} {
		if got := MemoryLimit(tc.buffer); got != tc.want {
			t.Errorf("MemoryLimit(%d) = %d, want %d", tc.buffer, got, tc.want)
		}
	}
	if MemoryLimit(fetcher.DefaultBufferMemory) >= 512<<20 {
		t.Errorf("the default's limit %d leaves no room under 512 MiB", MemoryLimit(fetcher.DefaultBufferMemory))
	}
}

func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	cfg := DefaultConfig()

	t.Setenv("GOMEMLIMIT", "")
	if n, by := ApplyMemoryLimit(cfg); n != MemoryLimit(cfg.BufferMemory) || by != KeyBufferMemory || debug.SetMemoryLimit(-1) != n {
		t.Errorf("default: got %d set by %q, runtime's limit %d; want %d by %q", n, by, debug.SetMemoryLimit(-1), MemoryLimit(cfg.BufferMemory), KeyBufferMemory)
	}

	debug.SetMemoryLimit(1 << 40)
	t.Setenv("GOMEMLIMIT", "1TiB")
	if n, by := ApplyMemoryLimit(cfg); n != 1<<40 || by != "GOMEMLIMIT" || debug.SetMemoryLimit(-1) != 1<<40 {
		t.Errorf("GOMEMLIMIT=1TiB: got %d set by %q, runtime's limit %d; want the environment's 1 TiB", n, by, debug.SetMemoryLimit(-1))
	}
}
