package sidecar

import (
	"os"
	"runtime"
)

// DefaultCPUCores is the default of sidecar.cpu.cores: one core. A sidecar
// moves record batches between sockets without decompressing them, and with
// more cores than it keeps busy the Go scheduler wakes threads on other
// cores for every hand-off between goroutines (a fetch answered, a batch
// queued, a produce request answered). On the benchmark's 2-core hosts one
// core cut the sidecars' CPU per GB mirrored by about a third for large
// batches, at the same or a higher rate (docs/performance.md, "CPU"); the
// cores it leaves go to the broker beside it.
const DefaultCPUCores = 1

// maxCPUCores bounds sidecar.cpu.cores (Go's own limit is far above).
const maxCPUCores = 1024

// ApplyCPUCores sets how many cores run the process's Go code at once
// (runtime.GOMAXPROCS) to c.CPUCores, at most what the runtime chose from
// the host's CPUs or its cgroup's CPU limit. The GOMAXPROCS environment
// variable, when set, wins, as for any Go program, and 0 keeps the
// runtime's choice. It returns the count in effect and what set it:
// "GOMAXPROCS", KeyCPUCores or "runtime". Call it once, from the daemon's
// main: it changes the whole process.
func ApplyCPUCores(c Config) (int, string) {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0), "GOMAXPROCS"
	}
	if c.CPUCores == 0 {
		return runtime.GOMAXPROCS(0), "runtime"
	}
	n := min(c.CPUCores, runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(n)
	return n, KeyCPUCores
}
