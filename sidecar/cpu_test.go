package sidecar

import (
	"runtime"
	"strconv"
	"testing"
)

func TestApplyCPUCores(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	cfg := DefaultConfig()

	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(3)
	if n, by := ApplyCPUCores(cfg); n != DefaultCPUCores || by != KeyCPUCores || runtime.GOMAXPROCS(0) != DefaultCPUCores {
		t.Errorf("default: got %d cores set by %q, GOMAXPROCS %d; want %d by %q", n, by, runtime.GOMAXPROCS(0), DefaultCPUCores, KeyCPUCores)
	}

	runtime.GOMAXPROCS(3)
	cfg.CPUCores = 8
	if n, by := ApplyCPUCores(cfg); n != 3 || by != KeyCPUCores || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("8 of 3: got %d cores set by %q, GOMAXPROCS %d; want 3, never more than the runtime chose", n, by, runtime.GOMAXPROCS(0))
	}

	cfg.CPUCores = 0
	if n, by := ApplyCPUCores(cfg); n != 3 || by != "runtime" || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("0: got %d cores set by %q, GOMAXPROCS %d; want the runtime's 3", n, by, runtime.GOMAXPROCS(0))
	}

	t.Setenv("GOMAXPROCS", strconv.Itoa(3))
	cfg.CPUCores = 1
	if n, by := ApplyCPUCores(cfg); n != 3 || by != "GOMAXPROCS" || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("GOMAXPROCS=3: got %d cores set by %q, GOMAXPROCS %d; want the environment's 3", n, by, runtime.GOMAXPROCS(0))
	}
}
