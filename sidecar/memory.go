package sidecar

import (
	"math"
	"os"
	"runtime/debug"
)

// Bounds of the Go runtime's soft memory limit derived from
// mirror.buffer.memory.bytes (see MemoryLimit).
const (
	memoryLimitBase  = 64 << 20  // the sidecar's own state, stacks and scrapes, besides records
	minMemoryLimit   = 256 << 20 // below this the collector would run nearly all the time with many partitions
	memoryLimitRatio = 3         // records held: the budget, the copies made of it, and the collector's room
)

// MemoryLimit is the soft memory limit a sidecar gives the Go runtime for a
// buffer budget of bufferMemory bytes: three times the budget plus 64 MiB,
// at least 256 MiB; 448 MiB for the default budget of 128 MiB. Records
// held stay within about twice the budget (the fetched bytes and the
// copies made of them); left alone, the collector lets the heap grow to
// twice what is live, so a sidecar whose budget is full would reach about
// four times the budget. Near the limit the collector runs more often
// instead, which keeps a sidecar with the default budget under 512 MiB.
func MemoryLimit(bufferMemory int64) int64 {
	if bufferMemory > (math.MaxInt64-memoryLimitBase)/memoryLimitRatio {
		return math.MaxInt64
	}
	return max(memoryLimitRatio*bufferMemory+memoryLimitBase, minMemoryLimit)
}

// ApplyMemoryLimit sets the Go runtime's soft memory limit
// (debug.SetMemoryLimit) to MemoryLimit(c.BufferMemory). The GOMEMLIMIT
// environment variable, when set, wins, as for any Go program. It returns
// the limit in effect and what set it: "GOMEMLIMIT" or KeyBufferMemory.
// Call it once, from the daemon's main: it changes the whole process.
func ApplyMemoryLimit(c Config) (int64, string) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	}
	limit := MemoryLimit(c.BufferMemory)
	debug.SetMemoryLimit(limit)
	return limit, KeyBufferMemory
}
