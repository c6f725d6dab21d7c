package fetcher

import (
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/internal/testwait"
)

// startIdle starts n partitions of an empty topic and waits until every
// one is MIRRORING: it has read its destination log end offset and source
// log start.
func startIdle(t *testing.T, n int) (*testEnv, *Manager) {
	t.Helper()
	const topic = "idle"
	e := newTestEnv(t, 1, map[string]int32{topic: int32(n)})
	// Long polls: the idle sessions' fetches allocate little while a
	// test measures.
	m := e.newManager(Logger(zap.NewNop()), FetchMaxWait(2*time.Second))
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	startAll(t, m, topic, parts)
	testwait.For(t, waitTimeout, "every partition MIRRORING", func() bool {
		st := m.Status()
		for _, s := range st {
			if s.State != StateMirroring {
				return false
			}
		}
		return len(st) == n
	})
	return e, m
}

// allocated returns the bytes fn allocates (in every goroutine meanwhile).
func allocated(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestScrapeMemoryPerPartition bounds what a Prometheus scrape of the
// per-partition series allocates, gathered and encoded as promhttp does:
// the registry holds every series at once until it has encoded them, so
// at 10,000 partitions this is the scrape's share of the sidecar's peak
// memory. Series built with prometheus.MustNewConstMetric (label pairs
// made and sorted for every series) took about 4,800 bytes per partition;
// a partition's series now share its label pairs (about 2,000).
func TestScrapeMemoryPerPartition(t *testing.T) {
	const n = 2000
	e, m := startIdle(t, n)
	testwait.For(t, waitTimeout, "every partition fetched", func() bool {
		for _, s := range m.Status() {
			if s.Lag < 0 || s.LastFetch.IsZero() {
				return false
			}
		}
		return true
	})
	var series int
	per := uint64(1 << 62)
	for range 5 { // the least of five: other goroutines allocate too
		series = 0
		per = min(per, allocated(func() {
			mfs, err := e.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				series += len(mf.Metric)
				if _, err := expfmt.MetricFamilyToText(io.Discard, mf); err != nil {
					t.Fatal(err)
				}
			}
		})/n)
	}
	t.Logf("a scrape of %d series allocated %d bytes per partition", series, per)
	if series < 6*n {
		t.Fatalf("%d series, want at least 6 per partition", series)
	}
	if per > 3000 {
		t.Fatalf("a scrape allocated %d bytes per partition, want at most 3,000", per)
	}
}

// TestStartMemoryPerPartition bounds what starting a partition allocates,
// from Start until it mirrors (kfake's share of the requests included, in
// this process): 1,000 partitions that start together read their offsets
// in a few batched ListOffsets requests (offsets.go). With a source
// ListOffsets per partition, each of which had kgo load the metadata of
// the whole topic, it was 400 KB to 1 MB per partition; now about 21 KB.
// It also logs the heap (kfake's partitions of both clusters included) and
// the goroutine stacks (about 7 KB each: the drivers') idle partitions keep.
func TestStartMemoryPerPartition(t *testing.T) {
	const n = 1000
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	per := allocated(func() { startIdle(t, n) }) / n
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("start: %d bytes allocated per partition; then heap in use +%d and stacks +%d bytes per partition",
		per, (int64(ms.HeapInuse)-int64(base.HeapInuse))/n, (int64(ms.StackInuse)-int64(base.StackInuse))/n)
	if per > 100_000 {
		t.Fatalf("starting a partition allocated %d bytes, want at most 100,000", per)
	}
}
